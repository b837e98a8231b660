"""Write-ahead log format of the `file` channel: records, segments, recovery.

A segment is a file `wal-<20-digit first seq>.log` holding records back to back.
One record is one put transaction:

    magic      u8   0xF1
    length     u32  bytes of payload
    crc        u32  CRC-32C of payload
    payload:
      first_seq  u64  sequence number of the record's first event
      count      u32  events in the record
      raw_len    u32  size of the uncompressed event block
      block      lz4 block of `count` events, each:
                   u32 body length, body, u32 meta length, meta
                 (meta = orjson [headers, record], empty when there are none)

Sequence numbers grow by one per event across records and segments. `scan`
reads a segment and stops at the first record that is short, has a bad magic,
length or CRC, or breaks the sequence: that is a torn write (SIGKILL mid-write,
power loss) or corruption. `repair` cuts the segment there and moves the cut bytes
into `quarantine/` so they can be inspected; the channel then starts normally.
"""

from __future__ import annotations

import dataclasses
import os
import struct

import crc32c
import lz4.block
import orjson

from agent.api import Event

MAGIC = 0xF1
HEADER = struct.Struct("<BII")
PAYLOAD_HEAD = struct.Struct("<QII")
U32 = struct.Struct("<I")
MAX_RECORD = 1 << 30


def segment_name(first_seq: int) -> str:
    return f"wal-{first_seq:020d}.log"


def encode_events(events: list[Event]) -> bytes:
    parts = []
    pack = U32.pack
    dumps = orjson.dumps
    for e in events:
        meta = dumps([e.headers, e.record]) if (e.headers or e.record is not None) else b""
        parts += (pack(len(e.body)), e.body, pack(len(meta)), meta)
    return b"".join(parts)


def decode_events(raw: bytes, count: int) -> list[Event]:
    events = []
    unpack = U32.unpack_from
    loads = orjson.loads
    pos = 0
    for _ in range(count):
        (n,) = unpack(raw, pos)
        body = raw[pos + 4 : pos + 4 + n]
        pos += 4 + n
        (m,) = unpack(raw, pos)
        if m:
            headers, record = loads(raw[pos + 4 : pos + 4 + m])
            events.append(Event(body, headers, record))
        else:
            events.append(Event(body))
        pos += 4 + m
    return events


def encode_record(first_seq: int, events: list[Event]) -> bytes:
    raw = encode_events(events)
    payload = PAYLOAD_HEAD.pack(first_seq, len(events), len(raw)) + lz4.block.compress(
        raw, store_size=False
    )
    return HEADER.pack(MAGIC, len(payload), crc32c.crc32c(payload)) + payload


def decode_payload(payload: bytes) -> list[Event]:
    _, count, raw_len = PAYLOAD_HEAD.unpack_from(payload)
    raw = lz4.block.decompress(payload[PAYLOAD_HEAD.size :], uncompressed_size=raw_len)
    return decode_events(raw, count)


@dataclasses.dataclass(slots=True)
class RecordRef:
    """Where one put record lives; `events` caches its decoded events when kept."""

    segment: int  # first seq of the segment file
    offset: int
    size: int  # bytes on disk, header included
    first_seq: int
    count: int
    events: list[Event] | None = None


@dataclasses.dataclass
class ScanResult:
    records: list[RecordRef]
    good_bytes: int  # where the valid prefix of the file ends
    problem: str | None  # why the scan stopped early, if it did


def scan(path: str, segment: int, expect_seq: int | None) -> ScanResult:
    """Valid records of one segment file, up to the first bad one."""
    with open(path, "rb") as f:
        data = f.read()
    records, pos = [], 0
    while pos < len(data):
        if len(data) - pos < HEADER.size:
            return ScanResult(records, pos, "truncated record header")
        magic, length, crc = HEADER.unpack_from(data, pos)
        if magic != MAGIC or length < PAYLOAD_HEAD.size or length > MAX_RECORD:
            return ScanResult(records, pos, "bad record header")
        end = pos + HEADER.size + length
        if end > len(data):
            return ScanResult(records, pos, "truncated record")
        payload = data[pos + HEADER.size : end]
        if crc32c.crc32c(payload) != crc:
            return ScanResult(records, pos, "CRC mismatch")
        first_seq, count, _ = PAYLOAD_HEAD.unpack_from(payload)
        if expect_seq is not None and first_seq != expect_seq:
            return ScanResult(
                records, pos, f"sequence gap (expected {expect_seq}, got {first_seq})"
            )
        records.append(RecordRef(segment, pos, end - pos, first_seq, count))
        expect_seq = first_seq + count
        pos = end
    return ScanResult(records, pos, None)


def repair(path: str, good_bytes: int, quarantine_dir: str) -> tuple[str, int]:
    """Cut `path` at `good_bytes`, moving the rest to quarantine; (where, bytes moved)."""
    os.makedirs(quarantine_dir, exist_ok=True)
    target = os.path.join(quarantine_dir, f"{os.path.basename(path)}.{good_bytes}.bad")
    with open(path, "r+b") as f:
        f.seek(good_bytes)
        tail = f.read()
        with open(target, "wb") as q:
            q.write(tail)
            q.flush()
            os.fsync(q.fileno())
        f.truncate(good_bytes)
        f.flush()
        os.fsync(f.fileno())
    return target, len(tail)
