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

Owned by its LogSegment (one event loop); not thread-safe, except `fileno()` for the
roll's fsync on the flush thread through a duplicated descriptor.
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
        self._fd: int | None = None
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

    def _open(self) -> int:
        """The descriptor, for a change to the file (which the next flush fsyncs)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._dirty = True
        return self._fd

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
            os.write(self._open(), ENTRY.pack(VERSION, *txn))
        except OSError:
            self._unsaved = True
            raise

    def persist(self) -> None:
        """Write the whole file again if an append could not (raises OSError if it
        still cannot)."""
        if not self._unsaved:
            return
        fd = self._open()
        os.ftruncate(fd, 0)
        os.write(fd, b"".join(ENTRY.pack(VERSION, *e) for e in self.entries))
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
        self.close()
        self.path.unlink(missing_ok=True)

    def _rewrite(self) -> None:
        if not self.entries:
            self.reset()
            return
        os.ftruncate(self._open(), len(self.entries) * ENTRY.size)

    def fileno(self) -> int | None:
        return self._fd

    def flush(self) -> None:
        self.persist()
        if self._fd is not None and self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
