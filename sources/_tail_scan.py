"""Discovery for the tail source: the table of known files and what a found file is.

`FileTable` holds the open files by (device, inode) and the ghosts (closed files
whose positions are kept), and moves files between the two as their lifecycle
(`_tail_file`) goes. `scan` globs the watched paths and matches every regular file
against what is known: an open file with the same (device, inode) is the same file,
wherever it moved; a ghost with the same inode and fingerprint is reopened at its
position; a ghost with the same inode but other first bytes means the inode was
reused: the file is new. A new inode whose first bytes match a ghost continues that
ghost (a compressed or copied rotation); one whose first bytes match a file still
open is a copytruncate copy, which waits (COPY) until its original is truncated or
closed and then takes over the original's position (`settle_copy`), so lines the
original had not reached are read from the copy and lines it had are not read twice.
Content matches need at least MIN_CONTENT_MATCH bytes of fingerprint, and a copy
whose original is never truncated (a plain `cp` of a live file) waits as long as the
original stays open. A truncated file whose copy no scan found (outside the watched
paths, or not scanned yet) reads on in the copy the table looks for in its directory
(`_tail_copy`); so does a file found truncated after a restart, and a copy left
unfinished by a restart is read on to its end. After a restart's first scan, a saved
file that its path no longer names and that no scan found (renamed away while the
agent was down) is looked for in its directory and read on to its end
(`recover_renamed`). A new file whose first bytes are
still a strict prefix of a known file's (a copy caught while being written, or an
empty file) is left for a later scan.

Owned by the tail source's read loop (one task); not thread-safe.
"""

from __future__ import annotations

import fnmatch
import glob
import gzip
import logging
import os
import stat
import time
from typing import Any

from sources._tail_copy import find_copy, find_renamed
from sources._tail_file import FileState, Framing, TailedFile, release
from sources._tail_positions import FP_MAX, MIN_CONTENT_MATCH, SavedPosition


class FileTable:
    """Open files by (dev, ino) and ghosts; see the module docstring. Other modules
    read `files`, `ghosts` and `deferred` and change them only through its methods."""

    def __init__(
        self,
        paths: list[str],
        exclude: list[str],
        *,
        start_at: str,
        gzip_files: bool,
        close_grace: float,
        forget_after: float,
        framing: Framing,
        log: logging.Logger,
        metrics: Any,
        component: str,
    ):
        self._paths = [os.path.abspath(p) for p in paths]
        self._exclude = [os.path.abspath(p) for p in exclude]
        self._start_at = start_at
        self._gzip = gzip_files
        self._close_grace = close_grace
        self._forget_after = forget_after
        self._framing = framing
        self._log = log
        self._metrics = metrics
        self._component = component
        self.files: dict[tuple[int, int], TailedFile] = {}  # OPEN, GONE and COPY files
        self.ghosts: list[TailedFile] = []  # CLOSED, IDLE and SEALED files
        self.deferred = False  # a fresh file was left for a later scan (_may_be_partial_copy)
        self._behind: dict[str, Any] = {}
        labels = {"component": component}
        self._m_rotations = metrics.counter(
            "logflume_agent_tail_rotations_total",
            "Files renamed or deleted away from the watched paths",
            **labels,
        )
        self._m_truncations = metrics.counter(
            "logflume_agent_tail_truncations_total",
            "Files truncated or replaced in place (copytruncate)",
            **labels,
        )
        self._m_open = metrics.gauge("logflume_agent_tail_files_open", "Files held open", **labels)
        self._m_abandoned = metrics.counter(
            "logflume_agent_tail_abandoned_bytes_total",
            "Bytes of rotated files never read: compressed or removed before the tail got there",
            **labels,
        )

    @property
    def paths(self) -> list[str]:
        return self._paths

    def restore(self, saved: list[SavedPosition]) -> None:
        """Ghosts for the files in the last run's position file; copies (copytruncate)
        left unfinished are opened again to be read on to their end."""
        self.ghosts = [TailedFile.from_saved(pos, self._framing) for pos in saved]
        for g in [g for g in self.ghosts if g.is_copy]:
            self._resume_copy(g)

    def _resume_copy(self, g: TailedFile) -> None:
        """`g` is a copy being read on when the agent stopped: if it is still at its
        path with bytes after its position, it is read on (`finish_in`)."""
        try:
            fd = os.open(g.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            head = os.pread(fd, FP_MAX, 0)
        except OSError:
            head = b""
            st = None
        if (
            st is None
            or (st.st_dev, st.st_ino) != g.key
            or st.st_size <= g.read_offset
            or not g.matches_head(head)
        ):
            os.close(fd)
            return
        self._log.info("tail: reading on %s from offset %d", g.path, g.read_offset)
        self.ghosts.remove(g)
        g.finish_in(fd, g.path, head, g.key)
        self._track(g)

    def entries(self) -> list[SavedPosition]:
        """Delivered positions of every known file, for the position store."""
        out = [f.position() for f in self.files.values() if f.state is not FileState.COPY]
        return out + [g.position() for g in self.ghosts]

    # ----------------------------------------------------------------- discovery

    def glob(self) -> list[str]:
        found = []
        for pattern in self._paths:
            for path in glob.iglob(pattern, recursive=True):
                if not any(fnmatch.fnmatch(path, ex) for ex in self._exclude):
                    found.append(path)
        return sorted(set(found))

    def scan(self, first_run: bool) -> None:
        self.deferred = False
        now = time.time()
        seen: set[tuple[int, int]] = set()
        for path in self.glob():
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if not stat.S_ISREG(st.st_mode) or key in seen:
                continue
            seen.add(key)
            f = self.files.get(key)
            if f is not None:
                f.seen_at(path, now)
            else:
                self._discover(path, st, first_run)
        for f in self.files.values():
            if f.key not in seen and f.state is FileState.OPEN:
                self.rotated(f)
        self.ghosts = [
            g for g in self.ghosts if g.tracker.in_flight or now - g.last_seen < self._forget_after
        ]
        self._m_open.set(len(self.files))

    def _discover(self, path: str, st: os.stat_result, first_run: bool) -> None:
        """`path` holds a regular file that no open file is: open it, find out what it is."""
        compressed = path.endswith(".gz")
        if compressed and (not self._gzip or time.time() - st.st_mtime < self._close_grace):
            return  # not wanted, or possibly still being written by the compressor
        opened = self._open_head(path, compressed)
        if opened is None:
            return
        fd, gz, head = opened
        if not self._adopt(path, st, fd, gz, head, first_run):
            release(fd, gz)

    def _open_head(self, path: str, compressed: bool) -> tuple[int, Any, bytes] | None:
        """The descriptor, the gzip reader over it (compressed files) and the first
        FP_MAX bytes of content; None (logged) when the file cannot be read."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self._log.warning("tail: cannot open %s: %s", path, exc)
            return None
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
            release(fd, gz)
            return None
        return fd, gz, head

    def _adopt(
        self, path: str, st: os.stat_result, fd: int, gz, head: bytes, first_run: bool
    ) -> bool:
        """Give the descriptor to the file it turns out to be. False when it stays
        unused: a ghost that stays closed, or a file decided at a later scan."""
        key = (st.st_dev, st.st_ino)
        compressed = gz is not None
        now = time.time()
        # A ghost at this inode: the same file again, unless the inode was reused.
        for g in self.ghosts:
            if g.key != key:
                continue
            if g.matches_head(head):
                g.touch(now)
                if g.stays_closed(st.st_size, compressed):
                    return False
                self.ghosts.remove(g)
                self._open(g, fd, gz, path, head, key)
                return True
            # Truncated or replaced while the agent was down, or the inode was reused.
            if not self._recover(g, path, key):
                self._log.info(
                    "tail: %s has other first bytes than the file last read at its inode "
                    "(truncated, replaced, or the inode reused); reading it from 0",
                    path,
                )
                self.ghosts.remove(g)
            break
        if len(head) < FP_MAX and self._may_be_partial_copy(head):
            # decided at a later scan, once it has more bytes; soon if it is fresh
            self.deferred |= now - st.st_mtime < self._close_grace
            return False
        if len(head) >= MIN_CONTENT_MATCH:
            # A ghost's content under a new inode: a compressed or copied rotation.
            for g in self.ghosts:
                if g.fp_len >= MIN_CONTENT_MATCH and g.matches_head(head):
                    self._log.info("tail: %s continues %s (same content)", path, g.path)
                    self.ghosts.remove(g)
                    self._open(g, fd, gz, path, head, key)
                    return True
            # An open file's content: a copytruncate copy, which waits for it.
            for orig in self.files.values():
                if (
                    orig.state is not FileState.COPY
                    and orig.fp_len >= MIN_CONTENT_MATCH
                    and orig.matches_head(head)
                ):
                    copy = TailedFile(key, path, 0, self._framing)
                    copy.wait_for(orig, fd, gz)
                    self._track(copy)
                    return True
        # A new file.
        start_at_end = first_run and self._start_at == "end"
        offset = st.st_size if start_at_end and not compressed else 0
        f = TailedFile(key, path, offset, self._framing)
        self._open(f, fd, gz, path, head, key)
        if compressed and start_at_end:
            self.close(f, FileState.SEALED)
        return True

    def _may_be_partial_copy(self, head: bytes) -> bool:
        """True when `head` (shorter than FP_MAX) is a strict prefix of a known file's
        first bytes: probably a copy still being written (copytruncate). Deciding now
        would take it for a new file and read it again from 0."""
        for known in (*self.files.values(), *self.ghosts):
            h = known.head
            if h is not None and len(h) >= MIN_CONTENT_MATCH and len(head) < len(h):
                if h.startswith(head):
                    return True
        return False

    # ------------------------------------------------------ lifecycle bookkeeping

    def _open(self, f: TailedFile, fd: int, gz, path: str, head: bytes, key) -> None:
        f.open(fd, gz, path, head, key)
        self._track(f)

    def _track(self, f: TailedFile) -> None:
        self.files[f.key] = f
        self._m_open.set(len(self.files))

    def _untrack(self, f: TailedFile) -> None:
        """`f` was just closed: out of the open files; a ghost unless it was dropped."""
        if self.files.get(f.key) is f:
            del self.files[f.key]
            self._m_open.set(len(self.files))
        if f.state is FileState.DROPPED:
            return
        self.ghosts.append(f)
        gauge = self._behind.pop(f.headers.get("path", f.path), None)
        if gauge is not None:
            gauge.set(0)

    def rotated(self, f: TailedFile) -> None:
        """`f` is no longer at any watched path (renamed away, or deleted)."""
        f.rotate()
        self._m_rotations.inc()

    def close(self, f: TailedFile, to: FileState = FileState.CLOSED) -> None:
        """Close `f` and keep its position as a ghost in state `to`."""
        f.close(to)
        self._untrack(f)

    def close_all(self) -> None:
        for f in list(self.files.values()):
            self.close(f)
        self._m_open.set(0)

    def settle_copy(self, copy: TailedFile) -> bool:
        """A copy (copytruncate) waits until its original is truncated or closed,
        then the original continues in it from its read position."""
        orig = copy.copy_of
        assert orig is not None  # a copy is made with its original
        if self.files.get(orig.key) is orig:
            return False
        del self.files[copy.key]
        if orig in self.ghosts:
            self.ghosts.remove(orig)
        self._log.info(
            "tail: %s continues %s from offset %d", copy.path, orig.path, orig.read_offset
        )
        orig.take_over(copy)
        self._track(orig)
        return True

    def new_generation(self, f: TailedFile, head: bytes) -> None:
        """`f` was truncated or replaced in place: read the new content from 0, and
        what `f` had not read from its copy (copytruncate), if there is one."""
        self._m_truncations.inc()
        path = f.headers.get("path", f.path)
        self._log.info("tail: %s was truncated or replaced; reading it from 0", path)
        nxt = f.next_generation(head)
        self._untrack(f)
        self._track(nxt)
        if not any(c.copy_of is f for c in self.files.values() if c.state is FileState.COPY):
            self._recover(f, path, f.key)  # else that copy takes over (settle_copy)

    def recover_renamed(self) -> None:
        """After the first scan of a restart: a saved file whose path now names another
        file or none, and that no scan found at a watched path, was renamed (or
        deleted) while the agent was down. Found in its directory by its identity
        with bytes after its position, it is read on to its end (`finish_in`), wherever
        it is; else its content is looked for as a copy's (`_recover`), or, when
        nothing unread is known, it is forgotten."""
        for g in [g for g in self.ghosts if g.state is FileState.CLOSED]:
            try:
                st = os.stat(g.path)
                live = (st.st_dev, st.st_ino)
            except OSError:
                live = None
            if live == g.key or g.key in self.files:
                continue  # at its path: the scan's (or its copy's) business
            found = find_renamed(os.path.dirname(g.path), g.key, g.fp_len, g.fp_crc)
            if found is None:
                self.ghosts.remove(g)
                if g.seen_size > g.read_offset:
                    self._recover(g, g.path, live or g.key, "renamed or deleted")
                continue
            assert found.fd is not None  # find_renamed opens uncompressed files only
            if found.size > g.read_offset:
                self._log.info(
                    "tail: %s was renamed to %s while the agent was down; reading it on "
                    "from offset %d",
                    g.path,
                    found.path,
                    g.read_offset,
                )
                self.ghosts.remove(g)
                g.finish_in(found.fd, found.path, found.head, found.key)
                self._track(g)
            else:
                os.close(found.fd)  # read to its end already

    def _recover(
        self, g: TailedFile, path: str, live: tuple[int, int], lost: str = "truncated"
    ) -> bool:
        """Ghost `g`, a generation of the file at `path` (identity `live`) that was
        `lost` (truncated or replaced, or renamed or deleted while the agent was down),
        reads on in its copy if one is found (True). Else the bytes it is known to
        have left unread are counted and logged as abandoned."""
        copy = find_copy(
            os.path.dirname(path), g.fp_len, g.fp_crc, g.read_offset, {*self.files, live}
        )
        if copy is not None and copy.fd is not None:
            if copy.size == g.read_offset:
                os.close(copy.fd)  # read to its end already
                return False
            self._log.info(
                "tail: %s was truncated at offset %d of %d; reading the rest from its copy %s",
                path,
                g.read_offset,
                copy.size,
                copy.path,
            )
            self.ghosts = [x for x in self.ghosts if x is not g and x.key != copy.key]
            g.finish_in(copy.fd, copy.path, copy.head, copy.key)
            self._track(g)
            return True
        abandoned = max(0, g.seen_size - g.read_offset)
        if abandoned or copy is not None:
            where = (
                f"its copy {copy.path} is compressed"
                if copy is not None
                else f"no copy of it found in {os.path.dirname(path)}"
            )
            self._log.warning(
                "tail: %s was %s before it was read to its end: at least %d bytes "
                "after offset %d are abandoned (%s)",
                path,
                lost,
                abandoned,
                g.read_offset,
                where,
            )
            self._m_abandoned.inc(abandoned)
        return False

    # ------------------------------------------------------------------- metrics

    def update_behind(self) -> None:
        for f in self.files.values():
            if f.gz is not None or f.state is FileState.COPY:
                continue
            assert f.fd is not None  # open and uncompressed
            try:
                size = os.fstat(f.fd).st_size
            except OSError:
                continue
            path = f.headers["path"]
            gauge = self._behind.get(path)
            if gauge is None:
                gauge = self._metrics.gauge(
                    "logflume_agent_tail_bytes_behind",
                    "Bytes of the file not yet delivered",
                    component=self._component,
                    path=path,
                )
                self._behind[path] = gauge
            gauge.set(max(0, size - f.tracker.delivered))
