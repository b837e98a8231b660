"""Helpers shared by the log tests: batch construction and whole-log reads."""

from broker.log import PartitionLog
from broker.protocol.records import BatchBuilder, Codec, iter_batches


def make_batch(n=1, ts=1000, codec=Codec.NONE, size=10, keys=None, values=None, tag=b"") -> bytes:
    b = BatchBuilder(codec=codec)
    for i in range(n):
        value = values[i] if values is not None else (tag + b"%d-" % i).ljust(size, b"x")
        key = keys[i] if keys is not None else None
        b.append(value, key=key, timestamp_ms=ts)
    return b.build()


def read_all(log: PartitionLog, start=None, max_bytes=1 << 20):
    """Every batch from `start` (default: log start) to the end, via read()."""
    offset = log.log_start_offset if start is None else start
    out = []
    while offset < log.log_end_offset:
        piece = log.read(offset, max_bytes)
        if piece is None:
            break
        batches = list(iter_batches(piece.read_bytes()))
        out += batches
        offset = batches[-1].next_offset
    return out


def all_records(log: PartitionLog):
    return [r for b in read_all(log) for r in b.records()]
