"""TransactionIndex: the aborted transactions whose markers a segment holds.

One `<20-digit base offset>.txnindex` file per segment, in Kafka's format: entries of
34 bytes, big-endian, appended in marker order and never rewritten in place:

    version            i16 = 0
    producer_id        i64
    first_offset       i64  the aborted transaction's first offset
    last_offset        i64  its abort marker's offset
    last_stable_offset i64  the partition's LSO right after the abort (ignoring the
                            high watermark): the first offset of the oldest
                            transaction still ongoing then, else last_offset + 1

An aborted transaction is indexed in the segment holding its marker (the leader when
it appends the marker, a follower when it copies it, recovery when it replays it).
A read_committed fetch from `fetch_offset` whose answer ends before `upper_bound`
needs every aborted transaction that overlaps the range, i.e. with
`last_offset >= fetch_offset` and `first_offset < upper_bound`: such a marker is at or
after the fetch offset, so the search starts at the segment holding the fetch
offset and walks forward, and it can stop at the first entry whose
`last_stable_offset >= upper_bound` (no transaction that started before the upper
bound is still to be found after it).

The file is created on the first entry (most segments never have one). Entries are
also kept in memory: a segment holds few aborted transactions. A file whose size is
not a multiple of 34 bytes, or holding an unknown version, fails `sanity_check`; the
loader then recovers the segment, which rebuilds the index from the log.

No descriptor is kept between changes (aborts are rare; a broker's open files are one
per segment): each change opens, writes and closes the file and marks it dirty; the
next flush opens it again to fsync it, or `open_for_sync` hands the roll's fsync on
the flush thread a descriptor of its own.

Owned by its LogSegment (one event loop); not thread-safe.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from broker.log.index import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions of one segment; see the module docstring."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.entries: list[AbortedTxn] = []
        self._dirty = False
        self._corrupt: str | None = None
        self._unsaved = False
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        if len(data) % ENTRY.size:
            self._corrupt = f"{self.path.name}: {len(data)} bytes is not whole entries"
            return
        for pos in range(0, len(data), ENTRY.size):
            version, *fields = ENTRY.unpack_from(data, pos)
            if version != VERSION:
                self._corrupt = f"{self.path.name}: entry version {version}"
                self.entries = []
                return
            self.entries.append(AbortedTxn(*fields))

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file was torn or is not ours."""
        if self._corrupt is not None:
            raise CorruptIndexError(self._corrupt)
        last = -1
        for e in self.entries:
            if e.last_offset <= last or e.first_offset > e.last_offset:
                raise CorruptIndexError(f"{self.path.name}: entries out of order")
            last = e.last_offset

    def _change(self, data: bytes, truncate_to: int | None = None) -> None:
        """Append `data` to the file (after cutting it to `truncate_to` bytes if given);
        the next flush fsyncs it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._dirty = True
            if truncate_to is not None:
                os.ftruncate(fd, truncate_to)
            if data:
                os.write(fd, data)
        finally:
            os.close(fd)

    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction; markers come in offset order. The entry counts
        at once; if the write fails (a full disk) OSError is raised and the file is
        rewritten whole at the next `persist` or `flush`."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"{self.path.name}: marker {txn.last_offset} is not after the last")
        self.entries.append(txn)
        if self._unsaved:
            self.persist()
            return
        try:
            self._change(ENTRY.pack(VERSION, *txn))
        except OSError:
            self._unsaved = True
            raise

    def persist(self) -> None:
        """Write the whole file again if an append could not (raises OSError if it
        still cannot)."""
        if not self._unsaved:
            return
        self._change(b"".join(ENTRY.pack(VERSION, *e) for e in self.entries), truncate_to=0)
        self._unsaved = False

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound), and whether the search is
        complete (a later segment cannot add any)."""
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                found.append(e)
            if e.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset`."""
        keep = 0
        while keep < len(self.entries) and self.entries[keep].last_offset < offset:
            keep += 1
        if keep == len(self.entries):
            return
        self.entries = self.entries[:keep]
        self._rewrite()

    def reset(self) -> None:
        """Forget every entry and delete the file (before a rebuild)."""
        self.entries = []
        self._corrupt = None
        self._unsaved = False
        self._dirty = False
        self.path.unlink(missing_ok=True)

    def _rewrite(self) -> None:
        if not self.entries:
            self.reset()
            return
        self._change(b"", truncate_to=len(self.entries) * ENTRY.size)

    def open_for_sync(self) -> int | None:
        """A new descriptor of the file if it changed since the last flush, for an
        fsync on another thread, which closes it; None if nothing needs one."""
        if not self._dirty:
            return None
        fd = os.open(self.path, os.O_RDONLY)
        self._dirty = False  # the caller's fsync covers what changed
        return fd

    def flush(self) -> None:
        self.persist()
        if (fd := self.open_for_sync()) is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete(self) -> None:
        self._dirty = False
        self.path.unlink(missing_ok=True)
