"""The Spark source's cost per record (issue 39), in CPU time: fetched record batches
decoded to Arrow in C (`batches.record_set_to_arrow`), and the whole read of a range
(`client.read_range`: its Fetch requests, then the same decoding).

    .venv/bin/python -m bench.bench_spark_decode                  # 1M records
    .venv/bin/python -m bench.bench_spark_decode --records 20000  # a quick check

`--records` 200-byte lines are produced lz4-compressed with librdkafka (as the agent's
kafka sink sends them) to a one-partition topic of a broker subprocess. Then, best of
`--repeat`, each with and without the VALUE_HASH column (the offline job's audit):

- decode: the partition's log segment, the very bytes a Fetch returns, cut into
  fetch-sized record sets of whole batches (`--fetch-bytes`), through
  `record_set_to_arrow` (CRC32C, lz4, the records walk, the Arrow arrays);
- read: `client.read_range` over the same offsets (the source's Fetch requests to the
  broker, fetcher.py, then the decoding above): this process's rusage.

CPU time, not wall time, is the figure: the machine may be shared. Socket I/O is in
the read figure only (the decode figure starts from bytes in memory).
"""

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from bench.bench_spark import LINE_BYTES, fill, fixed_lines, load
from spark_etl.source.batches import VALUE_HASH, record_set_to_arrow
from spark_etl.source.datasource import RECORDS_ARROW_SCHEMA
from testkit.kafka import create_topic
from testkit.procs import BrokerProcess

TOPIC = "decode"
HASHED = RECORDS_ARROW_SCHEMA.append(pa.field(VALUE_HASH, pa.int64()))
_LENGTH_AT = 8  # a batch's length field, after its base offset
LOG_OVERHEAD = 12


def cpu_s() -> float:
    """This process's CPU seconds, every thread."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def record_sets(log: bytes, fetch_bytes: int) -> list[memoryview]:
    """The segment cut into record sets of whole batches of at most `fetch_bytes`
    (at least one batch each), as consecutive Fetch responses return them."""
    view, out, pos, start = memoryview(log), [], 0, 0
    while pos < len(log):
        size = LOG_OVERHEAD + int.from_bytes(log[pos + _LENGTH_AT : pos + LOG_OVERHEAD], "big")
        if pos + size - start > fetch_bytes and pos > start:
            out.append(view[start:pos])
            start = pos
        pos += size
    if pos > start:
        out.append(view[start:pos])
    return out


def decode_all(sets: list[memoryview], records: int, schema) -> int:
    rows, nxt = 0, 0
    for data in sets:
        batches, nxt = record_set_to_arrow(data, TOPIC, 0, nxt, records, schema, [])
        rows += sum(b.num_rows for b in batches)
    return rows


def consume_all(bootstrap: str, records: int, schema) -> int:
    from spark_etl.source import client
    from spark_etl.source.options import SourceOptions

    opts = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC}, False)
    batches = client.read_range(opts, (TOPIC, 0), 0, records, schema)
    return sum(b.num_rows for b in batches)


def best_cpu(action, records: int, repeat: int) -> float:
    """Best CPU ns per record of `repeat` runs of `action` (which returns its rows)."""
    best = float("inf")
    for _ in range(repeat):
        before = cpu_s()
        rows = action()
        spent = cpu_s() - before
        assert rows == records, (rows, records)
        best = min(best, spent)
    return best / records * 1e9


def measure(records: int, repeat: int, fetch_bytes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        bk = BrokerProcess(Path(tmp) / "broker").start()
        try:
            create_topic(bk.bootstrap, TOPIC, 1)
            fill(bk.bootstrap, TOPIC, fixed_lines(records), partitions=1, compression="lz4")
            log = b"".join(p.read_bytes() for p in sorted(bk.data_dir.glob(f"{TOPIC}-0/*.log")))
            sets = record_sets(log, fetch_bytes)
            print(f"{len(log):,} bytes of lz4 batches, {len(sets)} record sets ({load()})")
            out = {}
            for name, schema in (("plain", RECORDS_ARROW_SCHEMA), ("hashed", HASHED)):
                out[f"decode_{name}"] = best_cpu(
                    lambda s=schema: decode_all(sets, records, s), records, repeat
                )
                out[f"consume_{name}"] = best_cpu(
                    lambda s=schema: consume_all(bk.bootstrap, records, s), records, repeat
                )
                print(
                    f"{name}: decode {out[f'decode_{name}']:.0f} ns/record, "
                    f"read_range {out[f'consume_{name}']:.0f} ns/record ({load()})",
                    flush=True,
                )
        finally:
            from spark_etl.source import client

            client.close_pooled()
            bk.stop()
    return out


def figures(mode: str) -> list[dict]:
    records, repeat = {"quick": (100_000, 2), "default": (1_000_000, 5), "full": (1_000_000, 9)}[
        mode
    ]
    m = measure(records, repeat, 8 << 20)
    shape = f"{records:,} x {LINE_BYTES} B lz4 records, best of {repeat}, CPU time"
    out = []
    for name, what in (("plain", "Kafka columns"), ("hashed", "Kafka columns + value_hash")):
        out.append(
            {
                "area": "spark",
                "metric": f"record sets -> Arrow in C ({what}), {shape}",
                "value": round(m[f"decode_{name}"], 1),
                "unit": "ns/record",
                "reference": "issue 39: >= 1.5 M records/s on local[2]",
                "peer": f"read_range (Fetch + decode): {m[f'consume_{name}']:.0f} ns/record",
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--fetch-bytes", type=int, default=8 << 20, help="max.partition.fetch.bytes")
    a = ap.parse_args()
    start = time.perf_counter()
    measure(a.records, a.repeat, a.fetch_bytes)
    print(f"done in {time.perf_counter() - start:.0f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
