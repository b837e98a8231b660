"""The tail source's table of files: discovery, identity, opening and closing.

`scan` globs the watched paths and matches every regular file against what is
known: an open file with the same (device, inode) is the same file, wherever it
moved; a ghost (closed file with a kept position) with the same inode and
fingerprint is reopened at its position; a ghost with the same inode but other
first bytes means the inode was reused: the file is new. A new inode whose first
bytes match a ghost continues that ghost (a compressed or copied rotation); one
whose first bytes match a file still open is a copytruncate copy, which waits
(`copy_of`) until its original is truncated or closed and then takes over the
original's position (`settle_copy`), so lines the original had not reached are read
from the copy and lines it had are not read twice. Content matches need at least
MIN_CONTENT_MATCH bytes of fingerprint, and a copy whose original is never
truncated (a plain `cp` of a live file) waits as long as the original stays open.
A new file whose first bytes are still a strict prefix of a known file's (a copy
caught while being written, or an empty file) is left for a later scan.

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

from sources._lines import LineSplitter
from sources._tail_state import FP_MAX, MIN_CONTENT_MATCH, TailedFile


class FileTable:
    """Open files by (dev, ino) and ghosts; see the module docstring."""

    def __init__(
        self,
        paths: list[str],
        exclude: list[str],
        *,
        start_at: str,
        gzip_files: bool,
        max_line: int,
        close_grace: float,
        forget_after: float,
        headers: dict[str, str],
        log: logging.Logger,
        metrics: Any,
        component: str,
    ):
        self._paths = [os.path.abspath(p) for p in paths]
        self._exclude = [os.path.abspath(p) for p in exclude]
        self._start_at = start_at
        self._gzip = gzip_files
        self._max_line = max_line
        self._close_grace = close_grace
        self._forget_after = forget_after
        self._base_headers = headers
        self._log = log
        self._metrics = metrics
        self._component = component
        self.files: dict[tuple[int, int], TailedFile] = {}  # open files
        self.ghosts: list[TailedFile] = []  # closed files whose positions are kept
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

    @property
    def paths(self) -> list[str]:
        return self._paths

    def rotated(self, f: TailedFile) -> None:
        """`f` was found deleted (no links left) while open."""
        f.gone = True
        self._m_rotations.inc()

    def close_all(self) -> None:
        for f in list(self.files.values()):
            self.close(f)
        self._m_open.set(0)

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

    def entries(self) -> list[dict]:
        """Delivered positions of every known file, for the position store."""
        out = [f.to_json() for f in self.files.values() if f.copy_of is None]
        return out + [g.to_json() for g in self.ghosts]

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
                f.gone, f.path, f.last_seen = False, path, now
            else:
                self.discover(path, st, first_run)
        for f in self.files.values():
            if f.key not in seen and not f.gone:
                f.gone = True
                self._m_rotations.inc()
        self.ghosts = [
            g for g in self.ghosts if g.tracker.in_flight or now - g.last_seen < self._forget_after
        ]
        self._m_open.set(len(self.files))

    def discover(self, path: str, st: os.stat_result, first_run: bool) -> None:
        key = (st.st_dev, st.st_ino)
        compressed = path.endswith(".gz")
        if compressed and not self._gzip:
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
        for g in self.ghosts:
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
                    self.ghosts.remove(g)
                    self.open(g, fd, gz, path, head)
                    return
                self._log.info(
                    "tail: %s reuses the inode of a forgotten file; reading from 0", path
                )
                self.ghosts.remove(g)
                break
        if len(head) < FP_MAX and self._may_be_partial_copy(head):
            # decided at a later scan, once it has more bytes; soon if it is fresh
            self.deferred |= now - st.st_mtime < self._close_grace
            if gz is not None:
                gz.close()
            os.close(fd)
            return
        if len(head) >= MIN_CONTENT_MATCH:
            for g in self.ghosts:
                if g.fp_len >= MIN_CONTENT_MATCH and g.matches_head(head):
                    self._log.info("tail: %s continues %s (same content)", path, g.path)
                    self.ghosts.remove(g)
                    g.dev, g.ino = key
                    g.sealed = g.idle_closed = False
                    self.open(g, fd, gz, path, head)
                    return
            for orig in self.files.values():
                if (
                    orig.copy_of is None
                    and orig.fp_len >= MIN_CONTENT_MATCH
                    and orig.matches_head(head)
                ):
                    f = TailedFile(*key, 0, 0, path, 0)
                    f.copy_of = orig
                    f.fd, f.gz = fd, gz
                    self.files[key] = f
                    return
        offset = 0
        if first_run and self._start_at == "end" and not compressed:
            offset = st.st_size
        f = TailedFile(*key, 0, 0, path, offset)
        self.open(f, fd, gz, path, head)
        if compressed and first_run and self._start_at == "end":
            self.close(f)
            f.sealed = True

    def open(self, f: TailedFile, fd: int, gz, path: str, head: bytes) -> None:
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
        self.files[f.key] = f
        self._m_open.set(len(self.files))

    def close(self, f: TailedFile) -> None:
        """Close `f`'s descriptor and keep it as a ghost resuming at a line start."""
        if self.files.get(f.key) is f:
            del self.files[f.key]
            self._m_open.set(len(self.files))
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
        self.ghosts.append(f)
        gauge = self._behind.pop(f.headers.get("path", f.path), None)
        if gauge is not None:
            gauge.set(0)

    def settle_copy(self, copy: TailedFile) -> bool:
        """A copy (copytruncate) waits until its original is truncated or closed,
        then takes over the original's identity and read position."""
        orig = copy.copy_of
        if self.files.get(orig.key) is orig:
            return False
        del self.files[copy.key]
        if orig in self.ghosts:
            self.ghosts.remove(orig)
        self._log.info(
            "tail: %s continues %s from offset %d", copy.path, orig.path, orig.read_offset
        )
        fd, gz, path = copy.fd, copy.gz, copy.path
        orig.dev, orig.ino = copy.dev, copy.ino
        self.open(orig, fd, gz, path, b"")
        return True

    def new_generation(self, f: TailedFile, head: bytes) -> None:
        """`f` was truncated or replaced in place: read the new content from 0."""
        self._m_truncations.inc()
        self._log.info("tail: %s was truncated or replaced; reading it from 0", f.path)
        fd, path = f.fd, f.headers.get("path", f.path)
        f.fd = None
        self.close(f)
        g = TailedFile(f.dev, f.ino, 0, 0, f.path, 0)
        self.open(g, fd, None, path, head)

    def update_behind(self) -> None:
        for f in self.files.values():
            if f.fd is None or f.gz is not None or f.copy_of is not None:
                continue
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
