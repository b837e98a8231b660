"""Wire codec micro-benchmark: the two hot paths of the broker.

- decode a Produce request with 6 partitions (one ~16 KB batch each: 160 records of
  100 bytes; the codec slices records without reading them);
- encode a Fetch response with 6 partitions, record sets given as sendfile-style
  slices (sized objects, not bytes) and, for comparison, as bytes.

Each at the last non-flexible version (Produce v8, Fetch v11) and the first flexible
one (Produce v9, Fetch v12: compact lengths, tagged sections), measured interleaved.

Then the check a leader runs on every produced batch (`RecordBatch.validate` and
`validate_records`: CRC, decompression, record walk) for a batch of 160 nginx-like
lines of ~100 bytes in each of the five codecs, with its compression ratio; and the
legacy format conversions old clients cost (Produce v0-2 up-converts a magic 1
message set, Fetch v0-3 down-converts a v2 batch), same 160 lines.

Run: .venv/bin/python -m bench.bench_protocol [--seconds 1.0] [--repeats 5]
Prints requests/s (median of the repeats) and the implied records/s.
"""

from __future__ import annotations

import argparse
import statistics
import time

from broker.protocol import ApiKey, RequestHeader, decode_request, encode_request, encode_response
from broker.protocol.records import BatchBuilder, Codec, RecordBatch

PARTITIONS = 6
RECORDS_PER_BATCH = 160
BATCH = b"\x00" * (61 + RECORDS_PER_BATCH * 100)


class FetchSlice:
    """Stand-in for the storage engine's file slice: only its length matters here."""

    def __init__(self, length: int):
        self.length = length

    def __len__(self) -> int:
        return self.length


def produce_frame(version: int) -> bytes:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": "nginx-access",
                "partition_data": [{"index": i, "records": BATCH} for i in range(PARTITIONS)],
            }
        ],
    }
    return encode_request(ApiKey.PRODUCE, version, 1, "rdkafka", body)[4:]


def fetch_body(records_for) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "nginx-access",
                "partitions": [
                    {
                        "partition_index": i,
                        "error_code": 0,
                        "high_watermark": 1_000_000 + i,
                        "last_stable_offset": 1_000_000 + i,
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": records_for(i),
                    }
                    for i in range(PARTITIONS)
                ],
            }
        ],
    }


def rate(fn, seconds: float) -> float:
    """Calls per second of fn() over about `seconds`."""
    n = 0
    batch = 200
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def measure(seconds: float, repeats: int) -> dict[str, tuple[float, float, float]]:
    """{case: (median, min, max) requests/s}, cases interleaved over the repeats."""
    slices = fetch_body(lambda i: FetchSlice(len(BATCH)))
    in_memory = fetch_body(lambda i: BATCH)
    cases = {}
    for produce_version, fetch_version in ((8, 11), (9, 12)):
        frame = produce_frame(produce_version)
        header = RequestHeader(ApiKey.FETCH, fetch_version, 7, "consumer")
        cases |= {
            f"decode Produce v{produce_version} (6 partitions)": lambda f=frame: decode_request(f),
            f"encode Fetch v{fetch_version} (6 partitions, file slices)": (
                lambda h=header: encode_response(h, slices)
            ),
            f"encode Fetch v{fetch_version} (6 partitions, bytes)": (
                lambda h=header: encode_response(h, in_memory)
            ),
        }
    results = {name: [] for name in cases}
    for _ in range(repeats):  # interleave cases so they share machine conditions
        for name, fn in cases.items():
            results[name].append(rate(fn, seconds))
    return {k: (statistics.median(v), min(v), max(v)) for k, v in results.items()}


def nginx_batch(codec: Codec) -> bytes:
    b = BatchBuilder(codec=codec)
    for i in range(RECORDS_PER_BATCH):
        b.append(
            b'10.0.%d.%d - - [25/Nov/2026:06:%02d:%02d +0000] "GET /item/%d HTTP/1.1" 200 %d'
            % (i % 7, i % 251, i % 60, (i * 7) % 60, i * 7919 % 10_000, 512 + i * 31 % 4096),
            timestamp_ms=1_795_000_000_000 + i,
        )
    return b.build()


def measure_codecs(seconds: float, repeats: int) -> dict[str, tuple[float, float, float, float]]:
    """{codec: (median, min, max) batches/s checked, compression ratio}."""
    batches = {c.name.lower(): nginx_batch(c) for c in Codec}
    raw_size = len(batches["none"]) - 61

    def check(data: bytes) -> None:
        batch = RecordBatch(data)
        batch.validate()
        batch.validate_records()

    results = {name: [] for name in batches}
    for _ in range(repeats):
        for name, data in batches.items():
            results[name].append(rate(lambda d=data: check(d), seconds))
    return {
        k: (statistics.median(v), min(v), max(v), raw_size / (len(batches[k]) - 61))
        for k, v in results.items()
    }


def measure_legacy(seconds: float, repeats: int) -> dict[str, tuple[float, float, float]]:
    """{conversion: (median, min, max) records/s}."""
    from broker.protocol.legacy import down_convert, up_convert

    batch = nginx_batch(Codec.NONE)
    legacy = down_convert(batch, 1, 0, 1 << 30)
    cases = {
        "up-convert a magic 1 message set (Produce v2)": lambda: up_convert(legacy),
        "down-convert a v2 batch to magic 1 (Fetch v3)": lambda: down_convert(batch, 1, 0, 1 << 30),
    }
    results = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            results[name].append(rate(fn, seconds) * RECORDS_PER_BATCH)
    return {k: (statistics.median(v), min(v), max(v)) for k, v in results.items()}


def figures(mode: str) -> list[dict]:
    seconds, repeats = {"quick": (0.3, 3), "default": (1.0, 5), "full": (2.0, 7)}[mode]
    records = PARTITIONS * RECORDS_PER_BATCH
    out = []
    for name, (median, low, high) in measure_legacy(seconds, repeats).items():
        out.append(
            {
                "area": "protocol",
                "metric": f"{name}, 160 nginx lines",
                "value": median,
                "unit": "records/s",
                "detail": f"median of {repeats} x {seconds:g} s (min {low:,.0f}, max {high:,.0f})",
            }
        )
    for codec, (median, low, high, ratio) in measure_codecs(seconds, repeats).items():
        out.append(
            {
                "area": "protocol",
                "metric": f"check a produced {codec} batch (160 nginx lines of ~100 B)",
                "value": median * RECORDS_PER_BATCH,
                "unit": "records/s",
                "detail": f"median of {repeats} x {seconds:g} s (min {low * RECORDS_PER_BATCH:,.0f},"
                f" max {high * RECORDS_PER_BATCH:,.0f}); compression ratio {ratio:.1f}",
            }
        )
    for name, (median, low, high) in measure(seconds, repeats).items():
        out.append(
            {
                "area": "protocol",
                "metric": f"{name}, ~16 KB batch per partition",
                "value": median,
                "unit": "requests/s",
                "detail": f"median of {repeats} x {seconds:g} s (min {low:,.0f}, max {high:,.0f});"
                f" ~{median * records / 1e6:.0f} M records/s of 100 B",
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="duration of one repeat")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    records = PARTITIONS * RECORDS_PER_BATCH
    for name, (median, low, high) in measure(args.seconds, args.repeats).items():
        print(
            f"{name:48s} {median:10,.0f} req/s  (~{median * records / 1e6:6.1f} M records/s "
            f"of 100 B; min {low:,.0f}, max {high:,.0f})"
        )
    for codec, (median, low, high, ratio) in measure_codecs(args.seconds, args.repeats).items():
        print(
            f"check a produced {codec:6s} batch  {median * RECORDS_PER_BATCH / 1e6:6.2f} M records/s"
            f"  (min {low * RECORDS_PER_BATCH / 1e6:.2f}, max {high * RECORDS_PER_BATCH / 1e6:.2f});"
            f" compression ratio {ratio:.1f}"
        )
    for name, (median, low, high) in measure_legacy(args.seconds, args.repeats).items():
        print(
            f"{name:48s} {median / 1e6:6.2f} M records/s (min {low / 1e6:.2f}, max {high / 1e6:.2f})"
        )


if __name__ == "__main__":
    main()
