"""`tail` source: follow files matched by globs, resuming from acknowledged positions.

Theory of operation. One task (the read loop) owns every open file. Each round it
reads at most one chunk (`read_chunk_bytes`) from each open file, splits it into
lines in bulk, and awaits `emit` for each batch: when the channel is full, `emit`
waits and the whole loop simply stops reading (backpressure, bounded memory). When
no file had data it sleeps until watchdog reports a change or `poll_interval`
passes. Discovery (`_scan`) globs the paths on start, every `rescan_interval`, and
when watchdog reports a file created, moved or deleted.

Identity and rotation (see `_tail_state`). An open file is followed by its file
descriptor, so renaming it (logrotate's default) changes nothing: the renamed file
keeps its identity and position and is read on to EOF. Only once a file is no
longer at any watched path (or deleted) and has stayed at EOF for `close_grace`
without growing is it closed: nothing unread is abandoned. A file whose size drops
below the read position, or whose first bytes change, was truncated (copytruncate)
or replaced: reading restarts at 0 for the new content, and the old generation is
kept as a "ghost" so that the copy logrotate made (same first bytes, new inode) is
recognised and read on from where the original stopped, not from 0.

Positions advance only from acknowledgements: each batch's Ack callback marks its
slot in the file's DeliveryTracker, and the position file stores delivered offsets
only (every `persist_interval` and on shutdown). After a crash, reading resumes at
the last delivered line; duplicates are limited to what was in flight.

`start_at` applies only on the very first run (no position file yet) to files
found by the first scan; any file discovered later, during the run or after a
restart, is read from its beginning, so lines written while the agent was down are
not skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import glob
import gzip
import os
import re
import stat
import time
from typing import Any, Literal

from agent.api import Ack, Context, Duration, Emit, Event, Size, Source, register
from sources._lines import LineSplitter, base_headers
from sources._tail_state import (
    FP_MAX,
    MIN_CONTENT_MATCH,
    PositionStore,
    TailedFile,
)
from sources._tail_watch import Watcher


@dataclasses.dataclass
class Multiline:
    start_pattern: str  # a line matching this (re.match, bytes) starts an event
    timeout: Duration = Duration(1.0)  # an event with no new line this long is emitted


@dataclasses.dataclass
class TailConfig:
    paths: list[str]  # globs (`**` allowed); relative ones are taken from the cwd
    exclude: list[str] = dataclasses.field(default_factory=list)
    start_at: Literal["end", "beginning"] = "end"  # files found on the very first run
    rescan_interval: Duration = Duration(5.0)
    poll_interval: Duration = Duration(0.25)
    close_grace: Duration = Duration(1.0)  # a rotated-away/deleted file at EOF this long closes
    close_inactive: Duration = Duration(300.0)  # an idle watched file closes (reopens on growth)
    forget_after: Duration = Duration(86400.0)  # positions of files unseen this long are dropped
    persist_interval: Duration = Duration(1.0)
    read_chunk_bytes: Size = Size(256 * 1024)
    batch_size: int = 1000
    max_line_bytes: Size = Size(1024 * 1024)
    multiline: Multiline | None = None  # {start_pattern: '^\S', timeout: 1s}
    gzip: bool = True  # read *.gz files that match the globs
    watch: bool = True  # use watchdog for prompt wake-ups (polling always runs too)
    add_host: bool = False


_DURATIONS = (
    "rescan_interval",
    "poll_interval",
    "close_grace",
    "close_inactive",
    "forget_after",
    "persist_interval",
)


@register("source", "tail")
class TailSource(Source):
    """Follows files; one instance per pipeline source, run as one task."""

    Config = TailConfig

    @classmethod
    def validate(cls, config: TailConfig) -> list[str]:
        errors = []
        if not config.paths:
            errors.append("paths: needs at least one glob")
        for key in _DURATIONS:
            if float(getattr(config, key)) <= 0 and key != "forget_after":
                errors.append(f"{key}: must be more than 0")
        if config.start_at not in ("end", "beginning"):
            errors.append(f"start_at: must be end or beginning, got {config.start_at!r}")
        for key in ("read_chunk_bytes", "batch_size", "max_line_bytes"):
            value = getattr(config, key)
            if not isinstance(value, int) or value < 1:
                errors.append(f"{key}: must be a positive integer, got {value!r}")
        if config.multiline is not None:
            try:
                re.compile(config.multiline.start_pattern.encode())
            except re.error as exc:
                errors.append(f"multiline.start_pattern: invalid regex ({exc})")
        return errors

    def __init__(self, config: TailConfig, context: Context):
        super().__init__(config, context)
        c = config
        for key in _DURATIONS:
            setattr(self, "_" + key, float(getattr(c, key)))
        self._paths = [os.path.abspath(p) for p in c.paths]
        self._exclude = [os.path.abspath(p) for p in c.exclude]
        self._chunk = int(c.read_chunk_bytes)
        self._batch = c.batch_size
        self._max_line = int(c.max_line_bytes)
        self._ml_start = None
        self._ml_timeout = 0.0
        if c.multiline is not None:
            self._ml_start = re.compile(c.multiline.start_pattern.encode())
            self._ml_timeout = float(c.multiline.timeout)
        self._base_headers = base_headers(context.name, c.add_host)
        self._store = PositionStore(context.state_dir, context.log)
        self._log = context.log
        self._files: dict[tuple[int, int], TailedFile] = {}  # open files by (dev, ino)
        self._ghosts: list[TailedFile] = []  # closed files whose positions are kept
        self._wake: asyncio.Event | None = None
        self._rescan = False
        self._saved: list[dict] | None = None
        self._seq = 0  # save order: a late thread never overwrites a newer save
        m, labels = context.metrics, {"component": context.name}
        self._m_lines = m.counter("logflume_agent_tail_lines_total", "Lines read", **labels)
        self._m_truncated = m.counter(
            "logflume_agent_tail_truncated_lines_total",
            "Lines cut to max_line_bytes",
            **labels,
        )
        self._m_rotations = m.counter(
            "logflume_agent_tail_rotations_total",
            "Files renamed or deleted away from the watched paths",
            **labels,
        )
        self._m_truncations = m.counter(
            "logflume_agent_tail_truncations_total",
            "Files truncated or replaced in place (copytruncate)",
            **labels,
        )
        self._m_open = m.gauge("logflume_agent_tail_files_open", "Files held open", **labels)
        self._m_persist_errors = m.counter(
            "logflume_agent_tail_position_write_errors_total",
            "Failed writes of the position file",
            **labels,
        )
        self._behind: dict[str, Any] = {}

    # ----------------------------------------------------------------- main loop

    async def run(self, emit: Emit, offer) -> None:
        self._wake = asyncio.Event()
        saved = self._store.load()
        self._ghosts = saved or []
        watcher = None
        persister = None
        try:
            self._scan(first_run=saved is None)
            self._persist()
            if self.config.watch:
                watcher = Watcher(self._paths, self._on_fs_event, self._log)
                watcher.start()
            persister = asyncio.create_task(self._persist_loop())
            await self._read_loop(emit)
        finally:
            if persister is not None:
                persister.cancel()
            if watcher is not None:
                watcher.stop()
            self._persist()
            for f in list(self._files.values()):
                self._close(f)
            self._m_open.set(0)

    def flush_state(self) -> None:
        """After `run` ended and the channels drained: save what the late acks delivered."""
        self._persist()

    def _on_fs_event(self, structural: bool) -> None:
        """Called on the loop (via call_soon_threadsafe) for watchdog events."""
        if structural:
            self._rescan = True
        self._wake.set()

    async def _read_loop(self, emit: Emit) -> None:
        loop = asyncio.get_running_loop()
        next_scan = loop.time() + self._rescan_interval
        while True:
            self._wake.clear()
            progressed = False
            for f in list(self._files.values()):
                if await self._service(f, emit):
                    progressed = True
            now = loop.time()
            if self._rescan or now >= next_scan:
                self._rescan = False
                self._scan(first_run=False)
                next_scan = now + self._rescan_interval
            if progressed:
                await asyncio.sleep(0)
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), self._poll_interval)
            except TimeoutError:
                pass

    # ----------------------------------------------------------------- discovery

    def _glob(self) -> list[str]:
        found = []
        for pattern in self._paths:
            for path in glob.iglob(pattern, recursive=True):
                if not any(fnmatch.fnmatch(path, ex) for ex in self._exclude):
                    found.append(path)
        return sorted(set(found))

    def _scan(self, first_run: bool) -> None:
        now = time.time()
        seen: set[tuple[int, int]] = set()
        for path in self._glob():
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if not stat.S_ISREG(st.st_mode) or key in seen:
                continue
            seen.add(key)
            f = self._files.get(key)
            if f is not None:
                f.gone, f.path, f.last_seen = False, path, now
            else:
                self._discover(path, st, first_run)
        for f in self._files.values():
            if f.key not in seen and not f.gone:
                f.gone = True
                self._m_rotations.inc()
        self._ghosts = [
            g for g in self._ghosts if g.tracker.in_flight or now - g.last_seen < self._forget_after
        ]
        self._m_open.set(len(self._files))

    def _discover(self, path: str, st: os.stat_result, first_run: bool) -> None:
        key = (st.st_dev, st.st_ino)
        compressed = path.endswith(".gz")
        if compressed and not self.config.gzip:
            return
        if compressed and time.time() - st.st_mtime < self._close_grace:
            return  # possibly still being written by the compressor
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self._log.warning("tail: cannot open %s: %s", path, exc)
            return
        gz = None
        try:
            if compressed:
                gz = gzip.GzipFile(fileobj=open(fd, "rb", closefd=False))
                head = gz.read(FP_MAX)
                gz.seek(0)
            else:
                head = os.pread(fd, FP_MAX, 0)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            self._log.warning("tail: cannot read %s: %s", path, exc)
            if gz is not None:
                gz.close()
            os.close(fd)
            return
        now = time.time()
        for g in self._ghosts:
            if g.key == key:
                if g.matches_head(head):
                    g.last_seen = now
                    if g.sealed or (
                        g.idle_closed and not compressed and st.st_size <= g.read_offset
                    ):
                        if gz is not None:
                            gz.close()
                        os.close(fd)
                        return
                    self._ghosts.remove(g)
                    self._open(g, fd, gz, path, head)
                    return
                self._log.info(
                    "tail: %s reuses the inode of a forgotten file; reading from 0", path
                )
                self._ghosts.remove(g)
                break
        if len(head) >= MIN_CONTENT_MATCH:
            for g in self._ghosts:
                if g.fp_len >= MIN_CONTENT_MATCH and g.matches_head(head):
                    self._log.info("tail: %s continues %s (same content)", path, g.path)
                    self._ghosts.remove(g)
                    g.dev, g.ino = key
                    g.sealed = g.idle_closed = False
                    self._open(g, fd, gz, path, head)
                    return
            for orig in self._files.values():
                if (
                    orig.copy_of is None
                    and orig.fp_len >= MIN_CONTENT_MATCH
                    and orig.matches_head(head)
                ):
                    f = TailedFile(*key, 0, 0, path, 0)
                    f.copy_of = orig
                    f.fd, f.gz = fd, gz
                    self._files[key] = f
                    return
        offset = 0
        if first_run and self.config.start_at == "end" and not compressed:
            offset = st.st_size
        f = TailedFile(*key, 0, 0, path, offset)
        self._open(f, fd, gz, path, head)
        if compressed and first_run and self.config.start_at == "end":
            self._close(f)
            f.sealed = True

    def _open(self, f: TailedFile, fd: int, gz, path: str, head: bytes) -> None:
        f.fd, f.gz, f.path = fd, gz, path
        f.firm_up(head)
        f.gone = f.idle_closed = False
        f.eof_since = None
        f.last_seen = time.time()
        f.splitter = LineSplitter(self._max_line, f.read_offset)
        f.emitted_end = f.read_offset
        f.headers = dict(self._base_headers, path=path)
        if gz is not None and f.read_offset:
            gz.seek(f.read_offset)
        self._files[f.key] = f

    def _close(self, f: TailedFile) -> None:
        """Close `f`'s descriptor and keep it as a ghost resuming at a line start."""
        if self._files.get(f.key) is f:
            del self._files[f.key]
        if f.gz is not None:
            f.gz.close()
            f.gz = None
        if f.fd is not None:
            os.close(f.fd)
            f.fd = None
        if f.copy_of is not None:
            return
        f.read_offset = f.held[1] if f.held else f.splitter.offset
        f.splitter, f.held = None, None
        self._ghosts.append(f)
        gauge = self._behind.pop(f.headers.get("path", f.path), None)
        if gauge is not None:
            gauge.set(0)

    # ------------------------------------------------------------------- reading

    async def _service(self, f: TailedFile, emit: Emit) -> bool:
        """Read one chunk of `f` if it has one; handle EOF, truncation, closing."""
        if f.copy_of is not None:
            return self._settle_copy(f)
        if f.gz is not None:
            return await self._read_gz(f, emit)
        try:
            st = os.fstat(f.fd)
        except OSError:
            self._close(f)
            return False
        if st.st_size != f.read_offset:
            head = os.pread(f.fd, FP_MAX, 0)
            if st.st_size < f.read_offset or not f.matches_head(head):
                self._new_generation(f, head)
                return True
            f.firm_up(head)
            data = os.pread(f.fd, self._chunk, f.read_offset)
            if data:
                f.read_offset += len(data)
                f.eof_since = None
                await self._feed(f, data, emit)
                return True
        await self._at_eof(f, st, emit)
        return False

    async def _read_gz(self, f: TailedFile, emit: Emit) -> bool:
        try:
            data = f.gz.read(self._chunk)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            self._log.warning("tail: stopped reading %s: %s", f.path, exc)
            data = b""
        if data:
            f.read_offset += len(data)
            await self._feed(f, data, emit)
            return True
        await self._finish(f, emit)
        f.sealed = True
        return False

    def _settle_copy(self, copy: TailedFile) -> bool:
        """A copy (copytruncate) waits until its original is truncated or closed,
        then takes over the original's identity and read position."""
        orig = copy.copy_of
        if self._files.get(orig.key) is orig:
            return False
        del self._files[copy.key]
        if orig in self._ghosts:
            self._ghosts.remove(orig)
        self._log.info(
            "tail: %s continues %s from offset %d", copy.path, orig.path, orig.read_offset
        )
        fd, gz, path = copy.fd, copy.gz, copy.path
        orig.dev, orig.ino = copy.dev, copy.ino
        self._open(orig, fd, gz, path, b"")
        return True

    def _new_generation(self, f: TailedFile, head: bytes) -> None:
        """`f` was truncated or replaced in place: read the new content from 0."""
        self._m_truncations.inc()
        self._log.info("tail: %s was truncated or replaced; reading it from 0", f.path)
        fd, path = f.fd, f.headers.get("path", f.path)
        f.fd = None
        self._close(f)
        g = TailedFile(f.dev, f.ino, 0, 0, f.path, 0)
        self._open(g, fd, None, path, head)

    async def _at_eof(self, f: TailedFile, st: os.stat_result, emit: Emit) -> None:
        now = time.monotonic()
        if f.eof_since is None:
            f.eof_since = now
        if f.held and now - f.held[3] >= self._ml_timeout:
            body = b"\n".join(f.held[0])
            f.held = None
            await self._emit(f, [body], f.splitter.offset, emit)
        if not f.gone:
            if st.st_nlink == 0:
                f.gone = True
                self._m_rotations.inc()
            elif now - f.path_checked >= self._poll_interval:
                f.path_checked = now
                try:
                    pst = os.stat(f.path)
                    moved = (pst.st_dev, pst.st_ino) != f.key
                except OSError:
                    moved = True
                if moved:
                    self._rescan = True
        idle = now - f.eof_since
        if f.gone and idle >= self._close_grace:
            await self._finish(f, emit)
        elif not f.gone and idle >= self._close_inactive:
            f.idle_closed = True
            self._close(f)

    async def _finish(self, f: TailedFile, emit: Emit) -> None:
        """The file is done (rotated away or deleted, read to EOF): emit what is
        left (an unterminated last line, a held multiline event) and close it."""
        bodies = []
        if f.held:
            bodies.append(b"\n".join(f.held[0]))
            f.held = None
        last = f.splitter.flush()
        if last is not None:
            bodies.append(last)
        if bodies:
            self._m_lines.inc(1 if last is not None else 0)
            await self._emit(f, bodies, f.splitter.offset, emit)
        self._close(f)
        self._m_open.set(len(self._files))

    async def _feed(self, f: TailedFile, data: bytes, emit: Emit) -> None:
        """Split one chunk into lines and emit them. `base`, the offset before the
        chunk, is line aligned; lines start exactly there unless one was cut."""
        sp = f.splitter
        base, exact = sp.offset, sp.exact
        lines = sp.feed(data)
        exact = exact and not sp.truncated
        if sp.truncated:
            self._m_truncated.inc(sp.truncated)
            sp.truncated = 0
        if not lines:
            return
        self._m_lines.inc(len(lines))
        if self._ml_start is None:
            await self._emit(f, lines, sp.offset, emit, base if exact else None)
        else:
            bodies, end = self._join(f, base, lines)
            if bodies:
                await self._emit(f, bodies, end, emit)

    def _join(self, f: TailedFile, base: int, lines: list[bytes]) -> tuple[list[bytes], int]:
        """Multiline: a line matching start_pattern begins an event, others append.
        Returns complete events and the offset they end at (the held event's start).
        Line starts are exact unless a line was cut, in which case every line of the
        chunk is taken to start at `base` (earlier, so a restart re-reads, never skips)."""
        sp = f.splitter
        pos = base
        exact = sp.exact and not any(len(line) >= self._max_line for line in lines)
        if exact:
            pos = sp.offset - sum(len(line) + 1 for line in lines)
        start = self._ml_start.match
        held = f.held
        out = []
        now = time.monotonic()
        for line in lines:
            if held is None or start(line) or held[2] + len(line) > self._max_line:
                if held is not None:
                    out.append(b"\n".join(held[0]))
                held = [[line], pos, len(line), now]
            else:
                held[0].append(line)
                held[2] += len(line) + 1
                held[3] = now
            if exact:
                pos += len(line) + 1
        f.held = held
        return out, held[1] if held else sp.offset

    async def _emit(
        self, f: TailedFile, bodies: list[bytes], end: int, emit: Emit, start: int | None = None
    ) -> None:
        """Emit `bodies` in batches of `batch_size`, each with an Ack for the offset it
        ends at: `end` for the last; for the others, counted from `start` when the
        bodies are exactly the lines from there, else the previous end (so a batch
        never claims bytes before the batches ahead of it are delivered)."""
        n, size, tracker, headers = len(bodies), self._batch, f.tracker, f.headers
        for i in range(0, n, size):
            part = bodies[i : i + size] if n > size else bodies
            if i + size >= n:
                f.emitted_end = max(f.emitted_end, end)
            elif start is not None:
                start += sum(map(len, part)) + len(part)
                f.emitted_end = max(f.emitted_end, start)
            ack = Ack(tracker.slot(f.emitted_end), len(part))
            await emit([Event(body, headers.copy(), None, ack) for body in part])

    # --------------------------------------------------------------- persistence

    def _entries(self) -> list[dict] | None:
        """Delivered positions to save, or None when unchanged since the last save."""
        entries = [f.to_json() for f in self._files.values() if f.copy_of is None]
        entries += [g.to_json() for g in self._ghosts]
        if entries == self._saved:
            return None
        self._saved = entries
        return entries

    def _save(self, entries: list[dict], seq: int) -> None:
        try:
            self._store.save(entries, seq)
        except OSError as exc:
            self._saved = None
            self._m_persist_errors.inc()
            self._log.error("tail: cannot write positions to %s: %s", self._store.path, exc)

    def _persist(self) -> None:
        entries = self._entries()
        if entries is not None:
            self._seq += 1
            self._save(entries, self._seq)

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self._persist_interval)
            self._update_behind()
            entries = self._entries()
            if entries is not None:
                self._seq += 1
                await asyncio.to_thread(self._save, entries, self._seq)

    def _update_behind(self) -> None:
        for f in self._files.values():
            if f.fd is None or f.gz is not None or f.copy_of is not None:
                continue
            try:
                size = os.fstat(f.fd).st_size
            except OSError:
                continue
            path = f.headers["path"]
            gauge = self._behind.get(path)
            if gauge is None:
                gauge = self.context.metrics.gauge(
                    "logflume_agent_tail_bytes_behind",
                    "Bytes of the file not yet delivered",
                    component=self.context.name,
                    path=path,
                )
                self._behind[path] = gauge
            gauge.set(max(0, size - f.tracker.delivered))
