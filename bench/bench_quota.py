"""How closely a producer quota holds: one confluent-kafka producer with client id
`bench-quota`, limited to `producer_byte_rate` = 10 MB/s, producing as fast as it can.

    .venv/bin/python -m bench.bench_quota [--seconds 60] [--quota-mb 10] [--warmup 15] [--timeline]

Starts a local broker (testkit.procs.BrokerProcess) with metrics on, sets the quota
with AlterClientQuotas (broker.protocol.client), then produces 10 kB records (acks=1,
lz4 off so that bytes on the wire are bytes counted) for `--seconds`. Reported:
acknowledged record bytes per second after the warm-up (the broker measures over
11 one-second samples, so a new client first sends up to ten seconds' worth of its
quota at full speed and is then throttled for up to the 11 s window, as in Kafka:
the warm-up leaves that first burst out), the broker's own measured rate (`quota_byte_rate`), the
throttle time it handed out, and the ratio measured/quota (1.0 is exact; Kafka's
own enforcement lands within a few per cent over such a window).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from broker.protocol import ApiKey
from broker.protocol.client import BlockingClient
from common.ports import free_port
from testkit.kafka import create_topic
from testkit.procs import BrokerProcess
from testkit.scrape import scrape

TOPIC = "bench-quota"
CLIENT_ID = "bench-quota"
RECORD = b"q" * 10_000
MB = 1_000_000


def set_quota(port: int, rate: float) -> None:
    entity = [{"entity_type": "client-id", "entity_name": CLIENT_ID}]
    op = {"key": "producer_byte_rate", "value": rate, "remove": False}
    body = {"entries": [{"entity": entity, "ops": [op]}], "validate_only": False}
    with BlockingClient("127.0.0.1", port, 10) as client:
        answer = client.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, body)
    code = answer["entries"][0]["error_code"]
    if code:
        raise SystemExit(f"AlterClientQuotas failed: error {code}")


def run(seconds: float, quota_mb: float, warmup: float, timeline: bool) -> dict[str, float]:
    metrics_port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(
            Path(tmp) / "data", settings={"metrics.listen": f"127.0.0.1:{metrics_port}"}
        ).start()
        try:
            create_topic(broker.bootstrap, TOPIC, partitions=1)
            set_quota(broker.port, quota_mb * MB)
            acked = [0]
            throttled = [0.0]

            def delivered(err, msg) -> None:
                if err is None:
                    acked[0] += len(msg.value())

            p = Producer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "client.id": CLIENT_ID,
                    "acks": 1,
                    "linger.ms": 5,
                    "queue.buffering.max.kbytes": 65536,
                    "throttle_cb": lambda e: throttled.__setitem__(
                        0, throttled[0] + e.throttle_time
                    ),
                }
            )
            start = time.monotonic()
            mark_at, mark_bytes = None, 0
            second, second_bytes = 1, 0
            while (now := time.monotonic()) - start < seconds:
                if mark_at is None and now - start >= warmup:
                    mark_at, mark_bytes = now, acked[0]
                if timeline and now - start >= second:
                    print(f"  {second:3d} s: {(acked[0] - second_bytes) / MB:7.2f} MB acknowledged")
                    second, second_bytes = second + 1, acked[0]
                try:
                    p.produce(TOPIC, RECORD, on_delivery=delivered)
                except BufferError:
                    p.poll(0.01)
                p.poll(0)
            end, end_bytes = time.monotonic(), acked[0]
            p.flush(60)
            samples = scrape(metrics_port)
            assert mark_at is not None, "--warmup must be shorter than --seconds"
            measured = (end_bytes - mark_bytes) / (end - mark_at) / MB
            broker_rate = samples.get(
                "logflume_broker_quota_byte_rate", type="produce", user="", client_id=CLIENT_ID
            )
            throttle_s = samples.get(
                "logflume_broker_quota_throttle_time_seconds_total",
                type="produce",
                user="",
                client_id=CLIENT_ID,
            )
            return {
                "quota MB/s": quota_mb,
                "measured MB/s (acknowledged, after warm-up)": round(measured, 2),
                "broker-measured MB/s": round((broker_rate or 0) / MB, 2),
                "throttle time handed out, s": round(throttle_s or 0, 1),
                "throttle time the client reported, s": round(throttled[0], 1),
                "measured / quota": round(measured / quota_mb, 3),
            }
        finally:
            broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--quota-mb", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--timeline", action="store_true", help="print each second's bytes")
    args = ap.parse_args()
    for name, value in run(args.seconds, args.quota_mb, args.warmup, args.timeline).items():
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
