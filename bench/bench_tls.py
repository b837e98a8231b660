"""TLS and SASL listeners: produce and consume over SSL and SASL_SSL (SCRAM-SHA-512)
against PLAINTEXT, same broker, same run.

    .venv/bin/python -m bench.bench_tls              # ~1 min
    .venv/bin/python -m bench.bench_tls --quick

One broker with `PLAINTEXT://`, `SSL://` and `SASL_SSL://` listeners (certificates
from common.certs, server-verified TLS, the default TLSv1.3; SASL_SSL logs in with
SCRAM-SHA-512, 4096 iterations, once per connection). For each repeat, the
listeners take turns: one confluent-kafka producer (acks=1, no compression, so
that every byte is encrypted, 1 MB batches) writes RECORDS 100-byte records into a
topic of its own, then one consumer reads them back from the beginning. Quoted: the
median rate per listener, the median SSL/PLAINTEXT ratio of adjacent runs, and the
broker's CPU seconds per MB moved (from /proc, the broker process alone). The
plaintext consumer is served with sendfile; the SSL and SASL_SSL ones from os.preadv
copies encrypted in the broker (broker/server/response_writer.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.bench_broker import CLK_TCK, RECORD_SIZE, record_pool
from common import certs
from common.ports import free_port, wait_for_port
from testkit.procs import BrokerProcess

PARTITIONS = 6


SASL_USER = ("bench", "bench-secret")


def _broker(root: Path) -> tuple[BrokerProcess, dict[str, dict]]:
    ca = certs.new_ca()
    ca_file = certs.write_ca(root / "certs", ca)
    keystore = certs.write_keystore(
        root / "certs", "broker", certs.issue(ca, "localhost", hosts=["127.0.0.1"], server=True)
    )
    plain, secure, sasl = free_port(), free_port(), free_port()
    settings = {
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure},SASL_SSL://127.0.0.1:{sasl}"
        ),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "num.partitions": PARTITIONS,
    }
    broker = BrokerProcess(root / "data", settings=settings, args=["--event-loop", "asyncio"])
    broker.start()
    wait_for_port(secure, proc=broker.proc)
    wait_for_port(sasl, proc=broker.proc)
    _add_user(f"127.0.0.1:{plain}", *SASL_USER)
    clients = {
        "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain}"},
        "SSL": {
            "bootstrap.servers": f"127.0.0.1:{secure}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca_file),
        },
        "SASL_SSL": {
            "bootstrap.servers": f"127.0.0.1:{sasl}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca_file),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": SASL_USER[0],
            "sasl.password": SASL_USER[1],
        },
    }
    return broker, clients


def _add_user(bootstrap: str, user: str, password: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    change = UserScramCredentialUpsertion(user, info, password.encode())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.alter_user_scram_credentials([change])[user].result(30)


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def produce(conf: dict, topic: str, records: int) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            **conf,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    pool = record_pool()
    chunk = [{"value": v} for v in pool[:1000]]
    sent, k = 0, 0
    start = time.perf_counter()
    while sent < records:
        accepted = producer.produce_batch(topic, chunk, partition=k % PARTITIONS)
        sent += accepted
        k += 1
        producer.poll(0 if accepted == len(chunk) else 0.005)
    if producer.flush(120):
        raise RuntimeError("records left unsent")
    return time.perf_counter() - start


def consume(conf: dict, topic: str, records: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            **conf,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 2_097_152,
            "queued.min.messages": 1_000_000,
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    count = 0
    start = time.perf_counter()
    while count < records and time.perf_counter() - start < 300:
        count += len(consumer.consume(num_messages=100_000, timeout=1.0))
    elapsed = time.perf_counter() - start
    consumer.close()
    if count < records:
        raise RuntimeError(f"consumed {count} of {records}")
    return elapsed


def run(records: int, repeats: int) -> dict:
    """{(listener, op): [(records/s, broker CPU s per MB), ...]} over `repeats`."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    mb = records * RECORD_SIZE / 1e6
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        broker, clients = _broker(Path(tmp))
        try:
            for r in range(repeats):
                for name, conf in clients.items():
                    topic = f"{name.lower()}-{r}"
                    for op, fn in (("produce", produce), ("consume", consume)):
                        cpu0 = _cpu(broker.proc.pid)
                        seconds = fn(conf, topic, records)
                        cpu = _cpu(broker.proc.pid) - cpu0
                        out.setdefault((name, op), []).append((records / seconds, cpu / mb))
                        print(
                            f"{op} {name}: {records / seconds:,.0f} records/s,"
                            f" broker {cpu / mb * 1000:.2f} ms CPU per MB",
                            flush=True,
                        )
        finally:
            broker.stop()
            if broker.proc.returncode not in (0, None):
                print(broker.log_text()[-2000:])
    return out


def figures(mode: str) -> list[dict]:
    records, repeats = {"quick": (300_000, 1), "default": (1_000_000, 3), "full": (3_000_000, 5)}[
        mode
    ]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results = run(records, repeats)
    median = statistics.median
    out = []
    targets = {"produce": ">= 0.7", "consume": ">= 0.5"}
    for op in ("produce", "consume"):
        plain = results[("PLAINTEXT", op)]
        for name in ("PLAINTEXT", "SSL", "SASL_SSL"):
            runs = results[(name, op)]
            out.append(
                {
                    "area": "tls",
                    "metric": f"{op} over {name}, 1 confluent-kafka client, 100-byte records",
                    "value": median(r[0] for r in runs),
                    "unit": "records/s",
                    "detail": f"{repeats} runs of {records:,} records: "
                    + ", ".join(f"{r[0]:,.0f}" for r in runs)
                    + f"; broker CPU {median(r[1] for r in runs) * 1000:.2f} ms per MB"
                    f"; load average at start {load}",
                }
            )
        for name, what, part in (
            ("SSL", "SSL", "part 1 (TLS listeners)"),
            ("SASL_SSL", "SASL_SSL (SCRAM-SHA-512)", "part 2 (SASL)"),
        ):
            secure = results[(name, op)]
            ratios = [s[0] / p[0] for s, p in zip(secure, plain, strict=True)]
            out.append(
                {
                    "area": "tls",
                    "metric": f"{op} {what} / PLAINTEXT, same broker, same client",
                    "value": median(ratios),
                    "unit": "ratio",
                    "target": targets[op],
                    "reference": f"security issue, {part}",
                    "detail": "median of the ratios of adjacent runs: "
                    + ", ".join(f"{x:.2f}" for x in ratios)
                    + f"; broker CPU per MB {name} / PLAINTEXT "
                    f"{median(r[1] for r in secure) / median(r[1] for r in plain):.2f}x",
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one short run")
    args = ap.parse_args()
    for f in figures("quick" if args.quick else "default"):
        print(f"{f['metric']}: {f['value']:,.2f} {f['unit']}  {f.get('detail', '')}")


if __name__ == "__main__":
    main()
