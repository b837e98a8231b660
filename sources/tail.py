"""`tail` source: follow files matched by globs, resuming from acknowledged positions.

Theory of operation. One task (the read loop) owns every open file. Each round it
reads at most one chunk (`read_chunk_bytes`) from each open file, splits it into
lines in bulk, and awaits `emit` for each batch: when the channel is full, `emit`
waits and the whole loop simply stops reading (backpressure, bounded memory). When
no file had data it sleeps until watchdog reports a file created, moved or deleted
or `poll_interval` passes (growth is found by this polling: see `_tail_watch` for
why not by modification events). Discovery (`FileTable.scan`) globs the paths on start, every
`rescan_interval`, and when watchdog reports a file created, moved or deleted.

One module per concept: this one drives the files (reading, EOF, closing, saving
positions); `_tail_file` is one file's lifecycle and states (open, rotation,
truncation, copy takeover, ghosts, multiline, its events); `_tail_scan` is discovery
(which file a path holds) and the table of known files; `_tail_positions` is file
identity, delivered offsets and the position file; `_tail_watch` is watchdog.

Identity and rotation. An open file is followed by its descriptor, so renaming it
(logrotate's default) changes nothing: the renamed file keeps its identity and
position and is read on to EOF. Only once a file is no longer at any watched path
(or deleted) and has stayed at EOF for `close_grace` without growing is it closed:
nothing unread is abandoned. A file whose size drops below the read position, or
whose first bytes change, was truncated (copytruncate) or replaced: reading restarts
at 0 for the new content, and the old generation is kept as a "ghost" so that the
copy logrotate made (same first bytes, new inode) is recognised and read on from
where the original stopped, not from 0.

Rename rotation, what is guaranteed. logrotate's default (`create`) renames the file
(`access.log` -> `access.log.1`) and creates a new one. Running, the tail reads the
renamed file on to its end by its descriptor, whether or not its new name matches
`paths`. When the rename happens while the agent is down, the saved path names the
new file at the restart: the saved file is looked for in the same directory by its
identity (device and inode, confirmed by its first bytes) and read on from its saved
position to its end, again whether or not its name matches `paths` (the new file is
read from 0); a restart while it is being read reads it on (its position is saved
like any file's). Not recovered: the unread bytes of a renamed file already
compressed (`compress` without `delaycompress`: use `delaycompress`) or removed
before the restart, or moved to another directory. Then a WARNING names the file
and at least the bytes known to be abandoned (from the largest size the tail saw),
and `logflume_agent_tail_abandoned_bytes_total` counts them. After a downtime longer
than `forget_after` the saved positions are forgotten, without a word.

Copytruncate, what is guaranteed. logrotate copies the file (`access.log` ->
`access.log.1`), then truncates it. When the tail sees the truncation before it read
the file to its end (it was behind: backpressure, a slow broker, or the agent was
down), the unread bytes are read from the copy, found in the same directory by its
first bytes (`_tail_copy`), whether or not its name matches `paths`: every line that
is in the copy or in the live file is delivered, on the terms of any file (see
Positions), also across a restart while the copy is being read or before the
truncation was seen (the copy's position is saved like any file's). Not recovered: (1)
lines written to the live file between logrotate's copy and its truncation, which
logrotate itself loses (they are in neither file); (2) the unread bytes of a copy
already compressed when the tail looks (`compress` without `delaycompress`: use
`delaycompress`), or of a copy not found (moved to another directory, or removed).
In both cases of (2) a WARNING names the file and the bytes abandoned, and
`logflume_agent_tail_abandoned_bytes_total` counts them.

Positions advance only from acknowledgements: each batch's Ack callback marks its
slot in the file's DeliveryTracker, and the position file stores delivered offsets
only. It is saved when an acknowledgement advances a delivered offset, not on a
timer: the saves of acknowledgements that come close together are coalesced (at
most one save per `persist_interval`, and never two at once), and on shutdown.
After a crash, reading resumes at the last delivered line saved, so the lines read
again are those in flight (emitted, not yet acknowledged) plus the acknowledgements
of the last `persist_interval` at most. A durable channel (`file`) settles at its
fsync, and tells the source at a restart how far it already holds each file
(`resume_from`), so what its log replays is not read from the file a second time.

Paths are checked when the file is loaded (`check_paths`), so that a typo or a
permission problem stops `logflume agent validate` instead of leaving an agent that
silently tails nothing. For each glob, its fixed directory (the part before the
first component with a wildcard) must be a directory the agent can list (read and
search); a literal path (no wildcard) that exists must be a readable regular file,
and its directory searchable. A fixed directory that does not exist is an error for
an absolute path: on a fresh host where the program that writes the logs comes later
(nginx installed after the agent), create the directory first. For a relative path
it is not, because it is resolved against the working directory of whoever
validates, which need not be the agent's (the repository's example names
`data/demo/...`, created by the demo). A glob that matches nothing in an existing
directory is fine: files appear later, as with Fluent Bit or Vector.

`start_at` applies only on the very first run (no position file yet) to files
found by the first scan; any file discovered later, during the run or after a
restart, is read from its beginning, so lines written while the agent was down are
not skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import glob
import gzip
import os
import re
import time
from collections.abc import Iterator
from typing import Literal

from agent.api import Context, Duration, Emit, Event, Size, Source, register
from common.aio import within
from sources._lines import base_headers
from sources._tail_file import FileState, Framing, TailedFile
from sources._tail_positions import FP_MAX, PositionStore, SavedPosition, resume_positions
from sources._tail_scan import FileTable
from sources._tail_watch import Watcher, glob_root


@dataclasses.dataclass
class Multiline:
    start_pattern: str  # regex: a line it matches at its start begins an event; others join it
    timeout: Duration = Duration(1.0)  # an event that got no new line for this long is emitted


@dataclasses.dataclass
class TailConfig:
    paths: list[str]  # globs (`**` allowed); relative ones are taken from the cwd
    exclude: list[str] = dataclasses.field(default_factory=list)  # globs of paths to skip (fnmatch)
    start_at: Literal["end", "beginning"] = "end"  # first run only: where existing files start
    rescan_interval: Duration = Duration(5.0)  # how often the globs are matched again
    poll_interval: Duration = Duration(0.1)  # files are checked for growth this often
    close_grace: Duration = Duration(1.0)  # a rotated-away/deleted file at EOF this long closes
    close_inactive: Duration = Duration(300.0)  # a file idle this long closes (reopens on growth)
    forget_after: Duration = Duration(86400.0)  # positions of files unseen this long are dropped
    persist_interval: Duration = Duration(0.05)  # least time between two saves of positions
    read_chunk_bytes: Size = Size(256 * 1024)  # most read from one file at a time
    batch_size: int = 1000  # most events per batch put into the channels
    max_line_bytes: Size = Size(1024 * 1024)  # longer lines are cut; longer multiline events split
    multiline: Multiline | None = None  # join lines into events (stack traces); null: one per line
    gzip: bool = True  # read `*.gz` files that match the globs
    watch: bool = True  # watchdog: prompt rescans on files created, moved or deleted
    add_host: bool = False  # add header `host`: this machine's name, as `${HOST}`


_DURATIONS = (
    "rescan_interval",
    "poll_interval",
    "close_grace",
    "close_inactive",
    "forget_after",
    "persist_interval",
)


def check_paths(patterns: list[str]) -> list[str]:
    """Problems with the globs that will not fix themselves (see the module docstring)."""
    problems = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            fixed, _ = glob_root(os.path.abspath(pattern))
            problem = _check_dir(pattern, fixed, os.R_OK | os.X_OK, "list")
        else:
            problem = _check_literal(pattern)
        if problem:
            problems.append(problem)
    return problems


def _check_dir(pattern: str, directory: str, mode: int, verb: str) -> str | None:
    if not os.path.exists(directory):
        if not os.path.isabs(pattern):
            return None
        return (
            f"{pattern!r}: directory {directory} does not exist"
            " (create it if the program writing there starts later)"
        )
    if not os.path.isdir(directory):
        return f"{pattern!r}: {directory} is not a directory"
    if not os.access(directory, mode):
        return f"{pattern!r}: cannot {verb} directory {directory} (permission denied)"
    return None


def _check_literal(pattern: str) -> str | None:
    path = os.path.abspath(pattern)
    problem = _check_dir(pattern, os.path.dirname(path), os.X_OK, "search")
    if problem or not os.path.exists(path):
        return problem
    if os.path.isdir(path):
        return f"{pattern!r}: is a directory (to follow its files use a glob like {pattern}/*.log)"
    if not os.access(path, os.R_OK):
        return f"{pattern!r}: cannot read {path} (permission denied)"
    return None


async def _emit_all(batches: Iterator[list[Event]], emit: Emit) -> None:
    """Emit each batch before the next is made (see `_tail_file`: reading stops
    while the channel is full, and acks reserve their slots in order)."""
    for batch in batches:
        await emit(batch)
        del batch  # not kept alive while the next one is made: the garbage collector
        # would scan and promote its events, a cost per line


def _present(dev: int, ino: int, path: str) -> bool:
    """`path` still holds the file (dev, ino)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)


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
        errors.extend(f"paths: {problem}" for problem in check_paths(config.paths))
        if config.multiline is not None:
            try:
                re.compile(config.multiline.start_pattern.encode())
            except re.error as exc:
                errors.append(f"multiline.start_pattern: invalid regex ({exc})")
        return errors

    def __init__(self, config: TailConfig, context: Context):
        super().__init__(config, context)
        c = config
        self._rescan_interval = float(c.rescan_interval)
        self._poll_interval = float(c.poll_interval)
        self._close_grace = float(c.close_grace)
        self._close_inactive = float(c.close_inactive)
        self._persist_interval = float(c.persist_interval)
        self._chunk = int(c.read_chunk_bytes)
        self._store = PositionStore(context.state_dir, context.log)
        self._delivered = asyncio.Event()  # a delivered offset advanced: save soon
        self._log = context.log
        m, labels = context.metrics, {"component": context.name}
        ml = c.multiline
        framing = Framing(
            headers=base_headers(context.name, c.add_host),
            max_line=int(c.max_line_bytes),
            batch_size=c.batch_size,
            multiline=re.compile(ml.start_pattern.encode()) if ml else None,
            multiline_timeout=float(ml.timeout) if ml else 0.0,
            lines=m.counter("logflume_agent_tail_lines_total", "Lines read", **labels),
            truncated=m.counter(
                "logflume_agent_tail_truncated_lines_total",
                "Lines cut to max_line_bytes",
                **labels,
            ),
            on_delivered=self._delivered.set,
            source=context.name,
        )
        self._table = FileTable(
            c.paths,
            c.exclude,
            start_at=c.start_at,
            gzip_files=c.gzip,
            close_grace=self._close_grace,
            forget_after=float(c.forget_after),
            framing=framing,
            log=context.log,
            metrics=context.metrics,
            component=context.name,
        )
        self._wake: asyncio.Event | None = None
        self._rescan = False
        self._saved: list[SavedPosition] | None = None
        self._held: list[dict] = []  # see resume_from
        self._seq = 0  # save order: a late thread never overwrites a newer save
        self._m_persist_errors = m.counter(
            "logflume_agent_tail_position_write_errors_total",
            "Failed writes of the position file",
            **labels,
        )
        self._m_saved_at = m.gauge(
            "logflume_agent_tail_position_saved_timestamp_seconds",
            "Unix time of the last successful write of the position file",
            **labels,
        )

    # ----------------------------------------------------------------- main loop

    async def run(self, emit: Emit, offer) -> None:
        self._wake = asyncio.Event()
        saved = resume_positions(self._store.load(), self._held, _present, time.time())
        self._table.restore(saved or [])
        watcher = None
        persister = None
        try:
            self._table.scan(first_run=saved is None)
            self._table.recover_renamed()
            self._persist()
            if self.config.watch:
                watcher = Watcher(self._table.paths, self._on_fs_event, self._log)
                watcher.start()
            persister = asyncio.create_task(self._persist_loop())
            await self._read_loop(emit)
        finally:
            if persister is not None:
                persister.cancel()
            if watcher is not None:
                watcher.stop()
            # Written whatever `_saved` says: a background save cancelled with the
            # persister may still be writing, and run() must not return before the
            # positions are on disk (the store's lock and sequence order the two).
            self._saved = None
            self._persist()
            self._table.close_all()

    def resume_from(self, held: list[dict]) -> None:
        """What the (durable) channels hold of each file: the restart reads after it."""
        self._held = held

    def flush_state(self) -> None:
        """After `run` ended and the channels drained: save what the late acks delivered."""
        self._persist()

    def _on_fs_event(self) -> None:
        """Called on the loop (via call_soon_threadsafe): a file was created, moved
        or deleted."""
        self._rescan = True
        assert self._wake is not None  # the watcher starts in run()
        self._wake.set()

    async def _read_loop(self, emit: Emit) -> None:
        loop = asyncio.get_running_loop()
        last_scan = loop.time()
        wake = self._wake
        assert wake is not None  # made by run()
        while True:
            wake.clear()
            progressed = False
            for f in list(self._table.files.values()):
                if await self._service(f, emit):
                    progressed = True
            now = loop.time()
            since = now - last_scan
            if (
                self._rescan
                or since >= self._rescan_interval
                or (self._table.deferred and since >= self._poll_interval)
            ):
                self._rescan = False
                self._table.scan(first_run=False)
                last_scan = now
            if progressed:
                await asyncio.sleep(0)
                continue
            try:
                await within(wake.wait(), self._poll_interval)
            except TimeoutError:
                pass

    # ------------------------------------------------------------------- reading

    async def _service(self, f: TailedFile, emit: Emit) -> bool:
        """Read one chunk of `f` if it has one; handle EOF, truncation, closing."""
        if f.state is FileState.COPY:
            return self._table.settle_copy(f)
        if f.gz is not None:
            return await self._read_gz(f, emit)
        assert f.fd is not None  # open and uncompressed
        try:
            st = os.fstat(f.fd)
        except OSError:
            self._table.close(f)
            return False
        if st.st_size != f.read_offset:
            head = os.pread(f.fd, FP_MAX, 0)
            if f.is_replaced(st.st_size, head):
                self._table.new_generation(f, head)
                return True
            f.firm_up(head, st.st_size)
            data = f.read(self._chunk)
            if data:
                await _emit_all(f.events(data), emit)
                return True
        await self._at_eof(f, st, emit)
        return False

    async def _read_gz(self, f: TailedFile, emit: Emit) -> bool:
        try:
            data = f.read(self._chunk)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            self._log.warning("tail: stopped reading %s: %s", f.path, exc)
            data = b""
        if data:
            await _emit_all(f.events(data), emit)
            return True
        await self._finish(f, emit, FileState.SEALED)
        return False

    async def _at_eof(self, f: TailedFile, st: os.stat_result, emit: Emit) -> None:
        now = time.monotonic()
        idle = f.at_eof(now)
        await _emit_all(f.expired(now), emit)  # a multiline event left alone too long
        if f.state is FileState.OPEN:
            if st.st_nlink == 0:
                self._table.rotated(f)
            elif f.moved(now, self._poll_interval):
                self._rescan = True
        if f.state is FileState.GONE:
            if idle >= self._close_grace:
                await self._finish(f, emit)
        elif idle >= self._close_inactive:
            self._table.close(f, FileState.IDLE)

    async def _finish(self, f: TailedFile, emit: Emit, to: FileState = FileState.CLOSED) -> None:
        """The file is done (rotated away or deleted, read to EOF): emit what is
        left (an unterminated last line, a held multiline event) and close it."""
        await _emit_all(f.last_events(), emit)
        self._table.close(f, to)

    # --------------------------------------------------------------- persistence

    def _entries(self) -> list[SavedPosition] | None:
        """Delivered positions to save, or None when unchanged since the last save."""
        entries = self._table.entries()
        if entries == self._saved:
            return None
        self._saved = entries
        return entries

    def _save(self, entries: list[SavedPosition], seq: int) -> None:
        try:
            self._store.save(entries, seq)
        except OSError as exc:
            self._saved = None
            self._m_persist_errors.inc()
            self._log.error("tail: cannot write positions to %s: %s", self._store.path, exc)
        else:  # also when a newer save went first: that one is just as recent
            self._m_saved_at.set(time.time())

    def _persist(self) -> None:
        entries = self._entries()
        if entries is not None:
            self._seq += 1
            self._save(entries, self._seq)

    async def _persist_loop(self) -> None:
        """Save after acknowledgements advance positions, at most once per
        `persist_interval` (the acks of that time go in one save), one save at a time."""
        while True:
            try:
                await within(self._delivered.wait(), self._rescan_interval)
            except TimeoutError:
                pass  # no acknowledgement for a while: still refresh the "behind" gauges
            self._delivered.clear()
            self._table.update_behind()
            entries = self._entries()
            if entries is not None:
                self._seq += 1
                await asyncio.to_thread(self._save, entries, self._seq)
            await asyncio.sleep(self._persist_interval)
