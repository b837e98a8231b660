"""One tailed file, from the scan that finds it to its last line: its lifecycle.

A `TailedFile` is one generation of one file: its identity (see `_tail_positions`),
its descriptor, read position, line splitter, the multiline event it holds and the
tracker of its delivered offset. It is the only writer of its fields: the file table
(`_tail_scan`) and the source (`tail`) move it through its states by calling its
methods, and a move that `TRANSITIONS` does not list raises IllegalTransition.

    state    descriptor  meaning
    NEW      none        just created by a scan, not yet opened
    OPEN     open        followed at a watched path
    GONE     open        no longer at any watched path (renamed away or deleted), or
                         a ghost read on in its copy or under its new name
                         (`finish_in`): read on to EOF, closed once at EOF for
                         `close_grace`
    COPY     open        a copytruncate copy, not read: waits until its original is
                         truncated or closed, then hands it its descriptor
    CLOSED   none        a ghost: position kept, reopened when seen again (loaded from
                         the position file, read to EOF after rotation, an old
                         generation, unreadable, or closed at shutdown)
    IDLE     none        a ghost closed after `close_inactive` at EOF at its path:
                         reopened only once it has grown
    SEALED   none        a ghost of a compressed file read to its end: never reopened
                         under its inode (only a copy of it under a new one)
    DROPPED  none        a copy that handed its descriptor on, or closed: forgotten

Rotation (the why is in `tail`'s docstring). `rotate` when the file left the watched
paths: it is read on through its descriptor. `next_generation` when it was truncated
or replaced in place: this generation closes to a ghost, which keeps its position for
the copy logrotate made (`take_over` when the copy was found at a watched path first,
`finish_in` when the file table found it in the directory, see `_tail_copy`), and a
new one reads the descriptor from 0. A saved file renamed while the agent was down
is found again in its directory and read on there as well (`finish_in`).

Multiline. With a start pattern, lines join into one `PendingEvent` until the next
line that matches, `max_line` bytes, or `multiline_timeout` without a new line. The
held event's start is where a restart resumes: the file closes to a ghost at that
offset, so an event cut by a shutdown is read whole again.

Events. `events`, `expired` and `last_events` are generators of batches, each made
only when the caller asks for it, that is after it emitted the previous one (so a
full channel stops the reading, and each batch's Ack reserves its slot in order).

Owned by the tail source's read loop (one task); not thread-safe.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import time
import zlib
from collections.abc import Callable, Iterator

from agent.api import Ack, Counter, Event
from sources._lines import LineSplitter
from sources._tail_positions import (
    FP_MAX,
    DeliveryTracker,
    SavedPosition,
    fingerprint_matches,
    mark_key,
)


class FileState(enum.Enum):
    NEW = "new"
    OPEN = "open"
    GONE = "gone"
    COPY = "copy"
    CLOSED = "closed"
    IDLE = "idle"
    SEALED = "sealed"
    DROPPED = "dropped"


NEW, OPEN, GONE, COPY = FileState.NEW, FileState.OPEN, FileState.GONE, FileState.COPY
CLOSED, IDLE, SEALED, DROPPED = (
    FileState.CLOSED,
    FileState.IDLE,
    FileState.SEALED,
    FileState.DROPPED,
)

TRANSITIONS: dict[FileState, frozenset[FileState]] = {
    NEW: frozenset({OPEN, COPY}),  # open / wait_for
    OPEN: frozenset({GONE, CLOSED, IDLE, SEALED}),  # rotate / close
    GONE: frozenset({OPEN, CLOSED, SEALED}),  # seen_at / close
    COPY: frozenset({DROPPED}),  # take_over by its original / close
    CLOSED: frozenset({OPEN}),  # open: seen again, same content elsewhere, take_over, finish_in
    IDLE: frozenset({OPEN}),
    SEALED: frozenset({OPEN}),
    DROPPED: frozenset(),
}


class IllegalTransition(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class Framing:
    """How the files of one tail source become events. Shared by them, read-only."""

    headers: dict[str, str]  # every event's headers except `path`, which each file adds
    max_line: int
    batch_size: int
    multiline: re.Pattern[bytes] | None  # a line that matches (re.match) starts an event
    multiline_timeout: float
    lines: Counter  # lines read
    truncated: Counter  # lines cut to max_line
    on_delivered: Callable[[], None] | None = None  # a delivered offset advanced (save soon)
    source: str = ""  # the source's name, in its Acks' marks


@dataclasses.dataclass(slots=True)
class PendingEvent:
    """The multiline event a file is assembling. Owned by its TailedFile."""

    lines: list[bytes]
    start: int  # offset of its first line: a restart reads the event again from there
    size: int  # bytes of the joined body so far
    updated: float  # monotonic time its last line joined

    def add(self, line: bytes, now: float) -> None:
        self.lines.append(line)
        self.size += len(line) + 1
        self.updated = now

    def body(self) -> bytes:
        return b"\n".join(self.lines)


def release(fd: int | None, gz) -> None:
    """Close a descriptor and the gzip reader over it (either may be None)."""
    if gz is not None:
        gz.close()
    if fd is not None:
        os.close(fd)


class TailedFile:
    """One generation of one file; see the module docstring. Other modules read its
    fields and change them only through its methods."""

    __slots__ = (
        "key",
        "fp_len",
        "fp_crc",
        "head",
        "path",
        "state",
        "fd",
        "gz",
        "read_offset",
        "splitter",
        "held",
        "headers",
        "tracker",
        "emitted_end",
        "seen_size",
        "is_copy",
        "eof_since",
        "path_checked",
        "last_seen",
        "copy_of",
        "_framing",
    )

    def __init__(
        self,
        key: tuple[int, int],
        path: str,
        offset: int,
        framing: Framing,
        fp_len: int = 0,
        fp_crc: int = 0,
    ):
        self.key = key  # (device, inode)
        self.fp_len, self.fp_crc = fp_len, fp_crc
        self.head: bytes | None = None  # first bytes seen in this run (None if loaded)
        self.path = path
        self.state = NEW
        self.fd: int | None = None
        self.gz = None  # gzip.GzipFile over `fd` for a compressed rotated file
        self.read_offset = offset
        self.splitter: LineSplitter | None = None  # while open
        self.held: PendingEvent | None = None
        self.headers: dict[str, str] = {}  # shared by its events (see agent.api.Event)
        self.tracker = DeliveryTracker(offset, framing.on_delivered)
        self.emitted_end = offset  # end offset of the last batch handed out
        self.seen_size = offset  # largest size of this generation seen (fstat)
        self.is_copy = False  # read on by `finish_in` wherever it is: saved, resumed on restart
        self.eof_since: float | None = None  # monotonic; None while there is data
        self.path_checked = 0.0  # monotonic time of the last "still at its path?" check
        self.last_seen = time.time()  # wall clock, saved: forget_after counts from it
        self.copy_of: TailedFile | None = None  # the original a COPY waits on
        self._framing = framing

    @classmethod
    def from_saved(cls, pos: SavedPosition, framing: Framing) -> TailedFile:
        """A ghost (CLOSED) for a file of the last run's position file."""
        f = cls((pos.dev, pos.ino), pos.path, pos.offset, framing, pos.fp_len, pos.fp_crc)
        f.state = CLOSED
        f.last_seen = pos.seen
        f.is_copy = pos.copy
        f.seen_size = max(pos.size, pos.offset)
        return f

    def position(self) -> SavedPosition:
        dev, ino = self.key
        return SavedPosition(
            dev,
            ino,
            self.fp_len,
            self.fp_crc,
            self.tracker.delivered,
            self.path,
            self.last_seen,
            self.is_copy,
            self.seen_size,
        )

    def _move(self, to: FileState) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"tail: {self.path}: {self.state.value} -> {to.value}")
        self.state = to

    # ------------------------------------------------------------------ identity

    def matches_head(self, head: bytes) -> bool:
        return fingerprint_matches(head, self.fp_len, self.fp_crc)

    def is_replaced(self, size: int, head: bytes) -> bool:
        """Truncated below the read position, or other first bytes: a new generation."""
        return size < self.read_offset or not self.matches_head(head)

    def firm_up(self, head: bytes, size: int = 0) -> None:
        """Extend a provisional fingerprint once the file is longer; note its `size`
        (what a truncation abandons, if its copy is not found, is counted from it)."""
        self.seen_size = max(self.seen_size, size)
        if self.head is None or len(head) > len(self.head):
            self.head = head[:FP_MAX]
        if len(head) > self.fp_len:
            self.fp_len = min(len(head), FP_MAX)
            self.fp_crc = zlib.crc32(head[: self.fp_len])

    # ----------------------------------------------------------------- lifecycle

    def open(self, fd: int, gz, path: str, head: bytes, key: tuple[int, int]) -> None:
        """Read `fd` (found at `path`, identity `key`) from the read position on."""
        self._move(OPEN)
        self.key = key
        self.fd, self.gz, self.path = fd, gz, path
        self.firm_up(head)
        self.eof_since = None
        self.last_seen = time.time()
        self.splitter = LineSplitter(self._framing.max_line, self.read_offset)
        self.emitted_end = self.read_offset
        self.headers = dict(self._framing.headers, path=path)
        if gz is not None and self.read_offset:
            gz.seek(self.read_offset)

    def wait_for(self, orig: TailedFile, fd: int, gz) -> None:
        """Become a copy of `orig` (copytruncate), holding `fd` until `take_over`."""
        self._move(COPY)
        self.copy_of = orig
        self.fd, self.gz = fd, gz

    def take_over(self, copy: TailedFile) -> None:
        """Read on from this file's position in `copy`, its copy, whose descriptor,
        identity and path it takes: it was truncated or closed since the copy."""
        if copy.copy_of is not self or OPEN not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"tail: {copy.path} cannot hand over to {self.path}")
        copy._move(DROPPED)
        fd, gz = copy.fd, copy.gz
        assert fd is not None  # a copy holds its descriptor until here
        copy.fd = copy.gz = None
        self.open(fd, gz, copy.path, b"", copy.key)

    def finish_in(self, fd: int, path: str, head: bytes, key: tuple[int, int]) -> None:
        """Read on from this ghost's position in `fd`, its copy at `path` (copytruncate)
        or the ghost's own file renamed to `path` while the agent was down (see
        `_tail_copy`), whose identity `key` it takes: like a file rotated away, it is
        read to EOF and then closed, and after a restart it is read on to its end
        wherever it is, watched or not (`is_copy`)."""
        self.open(fd, None, path, head, key)
        self._move(GONE)
        self.is_copy = True

    def seen_at(self, path: str, now: float) -> None:
        """Found at a watched path by a scan (an open file, or a copy)."""
        if self.state is GONE:
            self._move(OPEN)
        self.path, self.last_seen = path, now

    def touch(self, now: float) -> None:
        """A ghost found again that stays closed (see `stays_closed`)."""
        self.last_seen = now

    def stays_closed(self, size: int, compressed: bool) -> bool:
        """A ghost found at its inode with its fingerprint: sealed, or idle and not grown."""
        if self.state is SEALED:
            return True
        return self.state is IDLE and not compressed and size <= self.read_offset

    def rotate(self) -> None:
        """No longer at any watched path: renamed away or deleted."""
        self._move(GONE)

    def close(self, to: FileState = CLOSED) -> None:
        """Close the descriptor and become a ghost in state `to` (CLOSED, IDLE or
        SEALED) resuming at a line start: the held event's, if any. A copy is
        DROPPED instead."""
        self._move(DROPPED if self.state is COPY else to)
        release(self.fd, self.gz)
        self.fd = self.gz = None
        if self.state is DROPPED:
            return
        assert self.splitter is not None  # it was open
        self.read_offset = self.held.start if self.held else self.splitter.offset
        self.splitter = self.held = None

    def next_generation(self, head: bytes) -> TailedFile:
        """Truncated or replaced in place: close this generation (a ghost: its acks
        still settle, and the copy logrotate made can match it) and return the next,
        which reads the same descriptor from 0."""
        fd, path = self.fd, self.headers.get("path", self.path)
        assert fd is not None  # an open, uncompressed file is truncated or replaced
        self.fd = None  # handed to the next generation
        self.close()
        nxt = TailedFile(self.key, self.path, 0, self._framing)
        nxt.open(fd, None, path, head, self.key)
        return nxt

    # ------------------------------------------------------------------- reading

    def read(self, size: int) -> bytes:
        """Up to `size` bytes at the read position, which moves past them; b"" at EOF."""
        if self.gz is not None:
            data = self.gz.read(size)
        else:
            assert self.fd is not None  # read while open
            data = os.pread(self.fd, size, self.read_offset)
        if data:
            self.read_offset += len(data)
            self.eof_since = None
        return data

    def at_eof(self, now: float) -> float:
        """Seconds since the read found no more data (0 on the first call)."""
        if self.eof_since is None:
            self.eof_since = now
        return now - self.eof_since

    def moved(self, now: float, every: float) -> bool:
        """At most once per `every` seconds: True when its path names another file or
        none any more (a rotation the next scan will see)."""
        if now - self.path_checked < every:
            return False
        self.path_checked = now
        try:
            st = os.stat(self.path)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self.key

    # -------------------------------------------------------------------- events

    def events(self, data: bytes) -> Iterator[list[Event]]:
        """Batches of events for the lines that `data`, just read, completes. The
        offset before `data` is line aligned; lines start exactly there unless one
        was cut."""
        sp, framing = self.splitter, self._framing
        assert sp is not None  # read while open
        base, exact = sp.offset, sp.exact
        lines = sp.feed(data)
        cut = sp.take_truncated()
        if cut:
            exact = False
            framing.truncated.inc(cut)
        if not lines:
            return
        framing.lines.inc(len(lines))
        if framing.multiline is None:
            yield from self._batches(lines, sp.offset, base if exact else None)
        else:
            bodies, end = self._join(base, lines)
            if bodies:
                yield from self._batches(bodies, end)

    def expired(self, now: float) -> Iterator[list[Event]]:
        """The held multiline event, once no line joined it for `multiline_timeout`."""
        held = self.held
        if held and now - held.updated >= self._framing.multiline_timeout:
            assert self.splitter is not None  # held while open
            self.held = None
            yield from self._batches([held.body()], self.splitter.offset)

    def last_events(self) -> Iterator[list[Event]]:
        """At the end of the file: the held event and the unterminated last line."""
        assert self.splitter is not None  # at the end of an open file
        bodies = []
        if self.held:
            bodies.append(self.held.body())
            self.held = None
        last = self.splitter.flush()
        if last is not None:
            bodies.append(last)
            self._framing.lines.inc()
        if bodies:
            yield from self._batches(bodies, self.splitter.offset)

    def _join(self, base: int, lines: list[bytes]) -> tuple[list[bytes], int]:
        """Multiline: a line matching the start pattern begins an event, others join.
        Returns complete events and the offset they end at (the held event's start).
        Line starts are exact unless a line was cut, in which case every line of the
        chunk is taken to start at `base` (earlier, so a restart re-reads, never skips)."""
        sp, max_line = self.splitter, self._framing.max_line
        assert sp is not None  # read while open
        pos = base
        exact = sp.exact and not any(len(line) >= max_line for line in lines)
        if exact:
            pos = sp.offset - sum(len(line) + 1 for line in lines)
        assert self._framing.multiline is not None  # _join is for multiline framing
        start = self._framing.multiline.match
        held = self.held
        out = []
        now = time.monotonic()
        for line in lines:
            if held is None or start(line) or held.size + len(line) > max_line:
                if held is not None:
                    out.append(held.body())
                held = PendingEvent([line], pos, len(line), now)
            else:
                held.add(line, now)
            if exact:
                pos += len(line) + 1
        self.held = held
        return out, held.start if held else sp.offset

    def _batches(
        self, bodies: list[bytes], end: int, start: int | None = None
    ) -> Iterator[list[Event]]:
        """`bodies` in batches of `batch_size`, each with an Ack for the offset it
        ends at: `end` for the last; for the others, counted from `start` when the
        bodies are exactly the lines from there, else the previous end (so a batch
        never claims bytes before the batches ahead of it are delivered)."""
        n, size, tracker, headers = (
            len(bodies),
            self._framing.batch_size,
            self.tracker,
            self.headers,
        )
        source = self._framing.source
        for i in range(0, n, size):
            part = bodies[i : i + size] if n > size else bodies
            if i + size >= n:
                self.emitted_end = max(self.emitted_end, end)
            elif start is not None:
                start += sum(map(len, part)) + len(part)
                self.emitted_end = max(self.emitted_end, start)
            upto = self.emitted_end  # the mark: a durable channel holding it holds the file to here
            mark = (source, mark_key(self.key), [upto, self.fp_len, self.fp_crc, self.path])
            ack = Ack(tracker.slot(upto), len(part), mark)
            yield [Event(body, headers, None, ack) for body in part]
