"""The Spark jobs' tiers of the audit (common/audit.py): `spark-offline` and
`spark-realtime` count, per (host, topic, minute of the record timestamp), every
record they read, parsed or not, with the checksum of its value bytes as the agent
produced them; `parsed` and `rejected` say how many the parse accepted.

The per-record columns (`audit_columns`) are made from the raw records in the
Python worker that parses them, before the parse: XXH64 of the value, the record's
`host` header ("" without one) and the minute of its timestamp. `Totals` adds them
up per bucket (pyarrow's group_by over the two 32-bit halves of each hash, so the
sums stay exact in int64) and makes the audit records.

Each job publishes running totals under a writer of its own: the offline job one
key per (bucket, micro-batch), so a re-run batch (same offsets) rewrites its own
keys and the runs add up; the realtime job one key per bucket, its totals saved
with its window state after every batch, so a replayed batch publishes the same
totals again.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from itertools import repeat

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from common.audit import HASH_SEED, MASK, MINUTE_MS, AuditRecord, Bucket, Tally
from spark_etl import access_log

AUDIT_TYPES = {"record_host": pa.string(), "record_minute": pa.int64(), "value_hash": pa.int64()}
LOW32 = 0xFFFF_FFFF


def audit_columns(batch: pa.RecordBatch) -> dict[str, pa.Array]:
    """AUDIT_TYPES of a batch of source records (timestamp, value, and headers or
    host_header; the value's hash is taken from a `value_hash` column where the
    reader made one)."""
    names = batch.schema.names
    n = batch.num_rows
    if "value_hash" in names:  # hashed as the records were read (batches.VALUE_HASH)
        value_hash = batch.column("value_hash")
    else:
        values = pc.fill_null(batch.column("value"), b"").to_pylist()
        hashes = np.fromiter(map(xxhash.xxh64_intdigest, values, repeat(HASH_SEED)), np.uint64, n)
        value_hash = pa.array(hashes.view(np.int64))
    if access_log.HOST_HEADER in names:
        host = access_log._text(batch.column(access_log.HOST_HEADER))
    elif "headers" in names:
        host = access_log._header_host(batch.column("headers"))
    else:
        host = pa.nulls(n, pa.string())
    stamps = pc.fill_null(batch.column("timestamp").cast(pa.int64()), 0).to_numpy()  # us
    ms = stamps // 1000
    return {
        "record_host": pc.fill_null(host, ""),
        "record_minute": pa.array(ms - ms % MINUTE_MS),
        "value_hash": value_hash,
    }


def parse_and_audit(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: `access_log.parse_batch` plus the audit columns."""
    for batch in batches:
        parsed = access_log.parse_batch(batch)
        columns = dict(zip(parsed.schema.names, parsed.columns, strict=True))
        columns.update(audit_columns(batch))
        yield pa.RecordBatch.from_pydict(columns)


def hash_halves(value_hash: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The high and low 32 bits of each (unsigned) hash, as int64: sums of up to 2^31
    of them stay exact."""
    hashes = value_hash.to_numpy().view(np.uint64)
    return (
        pa.array((hashes >> np.uint64(32)).astype(np.int64)),
        pa.array((hashes & np.uint64(LOW32)).astype(np.int64)),
    )


def grouped(table: pa.Table, keys: list[str]) -> pa.Table:
    """`table` (audit columns, topic, parse_ok, and `keys`) grouped by `keys` plus the
    bucket: columns n, hash_hi, hash_lo, parsed."""
    hash_hi, hash_lo = hash_halves(table["value_hash"].combine_chunks())
    halves = pa.table(
        {
            **{k: table[k] for k in (*keys, "topic", "record_host", "record_minute")},
            "hash_hi": hash_hi,
            "hash_lo": hash_lo,
            "ok": pc.cast(pc.fill_null(table["parse_ok"], False), pa.int64()),
        }
    )
    out = halves.group_by([*keys, "topic", "record_host", "record_minute"], use_threads=False)
    out = out.aggregate([([], "count_all"), ("hash_hi", "sum"), ("hash_lo", "sum"), ("ok", "sum")])
    names = {
        "count_all": "n",
        "hash_hi_sum": "hash_hi",
        "hash_lo_sum": "hash_lo",
        "ok_sum": "parsed",
    }
    return out.rename_columns([names.get(c, c) for c in out.column_names])


@dataclasses.dataclass
class Totals:
    """Per bucket: records read, the two halves' sums of their hashes, parsed, and the
    generation the bucket was opened in. `forget_before` drops old buckets and opens
    a new generation: a bucket opened again by a record later still is published
    under a writer of its own (`<writer>.<generation>`), beside its old total."""

    generation: int = 0
    buckets: dict[Bucket, list[int]] = dataclasses.field(default_factory=dict)

    def add(self, groups: pa.Table) -> set[Bucket]:
        """Add a table of `grouped` rows (or rows with the same columns); the buckets it changed."""
        changed = set()
        for row in groups.select(
            ["record_host", "topic", "record_minute", "n", "hash_hi", "hash_lo", "parsed"]
        ).to_pylist():
            bucket = Bucket(row["record_host"], row["topic"], row["record_minute"])
            total = self.buckets.setdefault(bucket, [0, 0, 0, 0, self.generation])
            for i, name in enumerate(("n", "hash_hi", "hash_lo", "parsed")):
                total[i] += row[name]
            changed.add(bucket)
        return changed

    def records(self, tier: str, writer: str, buckets=None) -> list[tuple[bytes, bytes]]:
        """(key, value) audit records of `buckets` (default: all)."""
        out = []
        for bucket in self.buckets if buckets is None else buckets:
            n, hi, lo, parsed, generation = self.buckets[bucket]
            tally = Tally(n, ((hi << 32) + lo) & MASK)
            extra = {"parsed": parsed, "rejected": n - parsed}
            rec = AuditRecord(tier, bucket, f"{writer}.{generation}", tally, extra)
            out.append((rec.key(), rec.value()))
        return out

    def to_json(self) -> dict:
        buckets = [[b.host, b.topic, b.minute, *t] for b, t in self.buckets.items()]
        return {"generation": self.generation, "buckets": buckets}

    @classmethod
    def from_json(cls, doc: dict) -> Totals:
        totals = cls(doc["generation"])
        for host, topic, minute, *t in doc["buckets"]:
            totals.buckets[Bucket(host, topic, minute)] = list(t)
        return totals

    def forget_before(self, minute_ms: int) -> None:
        kept = {b: t for b, t in self.buckets.items() if b.minute >= minute_ms}
        if len(kept) < len(self.buckets):
            self.buckets = kept
            self.generation += 1


def job_id(location: str) -> str:
    """A short stable name for a job, made from its output or checkpoint location."""
    return hashlib.sha1(location.encode()).hexdigest()[:10]
