"""Write-ahead log format of the `file` channel: records, segments, recovery.

A segment is a file `wal-<20-digit first seq>.log` holding records back to back.
One record is one put transaction:

    magic      u8   0xF1, or 0xF2 when the record carries source marks
    length     u32  bytes of payload
    crc        u32  CRC-32C of payload
    payload:
      first_seq  u64  sequence number of the record's first event
      count      u32  events in the record
      raw_len    u32  size of the uncompressed event block
      (0xF2 only) u32 marks length, marks: orjson [[source, key, value], ...]
      block      lz4 block of `count` events, each:
                   u32 body length, body, u32 meta length, meta
                 (meta = orjson [headers, record] or [headers, record, time],
                 empty when there are none; `Event.time`, when set, is the third)

Marks are the sources' positions after the record's events (`Ack.mark`): written
in the same record as the events, a mark is on disk exactly when they are, so a
restart can tell each source how far it need not read again (`Marks`).

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
MAGIC_MARKS = 0xF2
HEADER = struct.Struct("<BII")
PAYLOAD_HEAD = struct.Struct("<QII")
U32 = struct.Struct("<I")
MAX_RECORD = 1 << 30
MAX_MARKS = 4096  # marks kept per channel (a key per tailed file); past it the oldest half go


def segment_name(first_seq: int) -> str:
    return f"wal-{first_seq:020d}.log"


def encode_events(events: list[Event]) -> bytes:
    parts: list[bytes] = []
    pack = U32.pack
    dumps = orjson.dumps
    for e in events:
        if e.time is not None:
            meta = dumps([e.headers, e.record, e.time])
        elif e.headers or e.record is not None:
            meta = dumps([e.headers, e.record])
        else:
            meta = b""
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
            meta = loads(raw[pos + 4 : pos + 4 + m])
            events.append(Event(body, meta[0], meta[1], None, meta[2] if len(meta) > 2 else None))
        else:
            events.append(Event(body))
        pos += 4 + m
    return events


def record_marks(events: list[Event]) -> list[list]:
    """The marks of a batch's Acks, one per Ack (in order; a run of events shares one)."""
    marks, ack = [], None
    for e in events:
        if e.ack is not ack:
            ack = e.ack
            if ack is not None and ack.mark is not None:
                marks.append(list(ack.mark))
    return marks


def encode_record(first_seq: int, events: list[Event], marks: list[list] | None = None) -> bytes:
    """A record of `events`; `marks`: their `record_marks`, when the caller has them."""
    raw = encode_events(events)
    head = PAYLOAD_HEAD.pack(first_seq, len(events), len(raw))
    if marks is None:
        marks = record_marks(events)
    magic = MAGIC
    if marks:
        magic = MAGIC_MARKS
        blob = orjson.dumps(marks)
        head += U32.pack(len(blob)) + blob
    payload = head + lz4.block.compress(raw, store_size=False)
    return HEADER.pack(magic, len(payload), crc32c.crc32c(payload)) + payload


def _split(magic: int, payload: bytes) -> tuple[int, int, int, list, int]:
    """(first_seq, count, raw_len, marks, where the lz4 block starts) of a payload."""
    first_seq, count, raw_len = PAYLOAD_HEAD.unpack_from(payload)
    pos, marks = PAYLOAD_HEAD.size, []
    if magic == MAGIC_MARKS:
        (n,) = U32.unpack_from(payload, pos)
        marks = orjson.loads(payload[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return first_seq, count, raw_len, marks, pos


def decode_record(data: bytes) -> list[Event]:
    """The events of one whole record (header included)."""
    _, count, raw_len, _, pos = _split(data[0], data[HEADER.size :])
    raw = lz4.block.decompress(data[HEADER.size + pos :], uncompressed_size=raw_len)
    return decode_events(raw, count)


class Marks:
    """The last mark per (source, key), by record sequence: what a channel holds or
    delivered of each source. `value` is the source's own (JSON); a later record's
    mark replaces an earlier one. Owned by one channel, on its event loop."""

    def __init__(self, doc: list | None = None):
        # (source, key) -> (seq, value); `doc` is `to_json()` of a saved checkpoint
        self.last: dict[tuple[str, str], tuple[int, object]] = {
            (source, key): (seq, value) for source, key, seq, value in doc or []
        }

    def add(self, seq: int, marks: list) -> None:
        for source, key, value in marks:
            known = self.last.get((source, key))
            if known is None or known[0] <= seq:
                self.last[(source, key)] = (seq, value)
        if len(self.last) > MAX_MARKS:  # keys of long-gone files (rotated away): the oldest go
            ordered = sorted(self.last.items(), key=lambda item: item[1][0])
            self.last = dict(ordered[len(ordered) - MAX_MARKS // 2 :])

    def of(self, source: str) -> dict[str, object]:
        return {k: v for (s, k), (_, v) in self.last.items() if s == source}

    def to_json(self) -> list:
        return [[s, k, seq, v] for (s, k), (seq, v) in self.last.items()]


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
    marks: list[tuple[int, list]] = dataclasses.field(default_factory=list)  # (seq, marks)


def scan(path: str, segment: int, expect_seq: int | None) -> ScanResult:
    """Valid records of one segment file, up to the first bad one."""
    with open(path, "rb") as f:
        data = f.read()
    result = ScanResult([], 0, None)
    pos = 0
    while pos < len(data):
        result.good_bytes = pos
        if len(data) - pos < HEADER.size:
            result.problem = "truncated record header"
            return result
        magic, length, crc = HEADER.unpack_from(data, pos)
        if magic not in (MAGIC, MAGIC_MARKS) or length < PAYLOAD_HEAD.size or length > MAX_RECORD:
            result.problem = "bad record header"
            return result
        end = pos + HEADER.size + length
        if end > len(data):
            result.problem = "truncated record"
            return result
        payload = data[pos + HEADER.size : end]
        if crc32c.crc32c(payload) != crc:
            result.problem = "CRC mismatch"
            return result
        first_seq, count, _, marks, _ = _split(magic, payload)
        if expect_seq is not None and first_seq != expect_seq:
            result.problem = f"sequence gap (expected {expect_seq}, got {first_seq})"
            return result
        result.records.append(RecordRef(segment, pos, end - pos, first_seq, count))
        if marks:
            result.marks.append((first_seq, marks))
        expect_seq = first_seq + count
        pos = end
    result.good_bytes = pos
    return result


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
