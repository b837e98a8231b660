"""Producer state snapshot files: `<20-digit offset>.snapshot` in a partition directory.

Owned by `ProducerStateManager` (producer_state.py), which decides when to write and
which one to read; this module only encodes, decodes and writes them. Pure functions,
safe from any thread.

Format (big-endian):

    magic   4s  b"LFPS"
    version u16 = 2 (1 is still read)
    crc     u32 CRC-32C of everything after this field
    count   u32 number of producer entries, then per entry:
        v1: producer_id i64, epoch i16, last_timestamp i64, batch count u8
        v2: producer_id i64, epoch i16, last_timestamp i64, coordinator_epoch i32,
            current_txn_first_offset i64 (-1: no ongoing transaction), batch count u8
        then per batch (oldest first): first_seq i32, last_seq i32, first_offset i64,
        last_offset i64

Version 2 carries what transactions need across a restart (KIP-98): the first offset
of each producer's ongoing transaction, so the last stable offset holds at it until
the marker lands, and the epoch of the coordinator that last wrote a marker, which
fences a marker from an older coordinator. A version 1 file has neither: its
producers load with no ongoing transaction and coordinator epoch -1.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c

from common.fsutil import TMP_SUFFIX, atomic_write

SNAPSHOT_SUFFIX = ".snapshot"
MAGIC = b"LFPS"
VERSION = 2
_HEADER = struct.Struct(">4sHI")
_COUNT = struct.Struct(">I")
_ENTRY_V1 = struct.Struct(">qhqB")
_ENTRY_V2 = struct.Struct(">qhqiqB")
_BATCH = struct.Struct(">iiqq")


class CorruptSnapshotError(ValueError):
    """A producer snapshot file is truncated, fails its CRC or has an unknown version."""


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode(entries, version: int = VERSION) -> bytes:
    """The bytes of a snapshot of `entries` (ProducerEntry objects); `version` 1 only
    for tests of the old format."""
    body = bytearray(_COUNT.pack(len(entries)))
    for e in entries:
        if version == 1:
            body += _ENTRY_V1.pack(e.producer_id, e.epoch, e.last_timestamp, len(e.batches))
        else:
            first = -1 if e.txn_first_offset is None else e.txn_first_offset
            body += _ENTRY_V2.pack(
                e.producer_id,
                e.epoch,
                e.last_timestamp,
                e.coordinator_epoch,
                first,
                len(e.batches),
            )
        for b in e.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
    return _HEADER.pack(MAGIC, version, crc32c.crc32c(bytes(body))) + body


def decode(data: bytes, name: str, make_entry, make_batch) -> list:
    """Entries of a snapshot's bytes: `make_entry(pid, epoch, ts, coordinator_epoch,
    txn_first_offset or None)` builds each, `make_batch(*fields)` each remembered batch."""
    if len(data) < _HEADER.size + _COUNT.size:
        raise CorruptSnapshotError(f"{name}: truncated header")
    magic, version, crc = _HEADER.unpack_from(data)
    if magic != MAGIC or version not in (1, 2):
        raise CorruptSnapshotError(f"{name}: bad magic/version {magic!r}/{version}")
    body = memoryview(data)[_HEADER.size :]
    if crc32c.crc32c(body) != crc:
        raise CorruptSnapshotError(f"{name}: CRC mismatch")
    try:
        (count,) = _COUNT.unpack_from(body)
        pos = _COUNT.size
        entries = []
        for _ in range(count):
            if version == 1:
                pid, epoch, ts, n = _ENTRY_V1.unpack_from(body, pos)
                coordinator_epoch, first = -1, -1
                pos += _ENTRY_V1.size
            else:
                pid, epoch, ts, coordinator_epoch, first, n = _ENTRY_V2.unpack_from(body, pos)
                pos += _ENTRY_V2.size
            entry = make_entry(pid, epoch, ts, coordinator_epoch, None if first < 0 else first)
            for _ in range(n):
                entry.batches.append(make_batch(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries.append(entry)
    except struct.error as e:
        raise CorruptSnapshotError(f"{name}: {e}") from None
    if pos != len(body):
        raise CorruptSnapshotError(f"{name}: {len(body) - pos} trailing bytes")
    return entries


def write(path: Path, data: bytes, sync: bool) -> None:
    """Write a snapshot all or nothing: fsynced (`atomic_write`) or, with `sync=False`,
    a temp file renamed over `path` whose fsync is `sync_snapshot`'s job."""
    if sync:
        atomic_write(path, data)
        return
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
    except OSError:
        tmp.unlink(missing_ok=True)  # e.g. ENOSPC: no torn temp file holding space
        raise
    os.replace(tmp, path)


def sync_snapshot(path: Path) -> None:
    """fsync a snapshot written with `sync=False`; any thread. One deleted meanwhile
    (truncation, retention) is skipped. The rename becomes durable with the
    directory's fsync, which is the caller's."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
