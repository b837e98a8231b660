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
broker's CPU time per MB moved (the broker process alone: the nanoseconds its threads
ran, from /proc/<pid>/task/*/schedstat). The plaintext consumer is served with
sendfile; the SSL and SASL_SSL ones by the broker's TLS transport, which reads the
log slices as it encrypts them (broker/server/tls_transport.py).

Issue 39 asks for the broker's CPU per fetched MB over SSL within 2x plaintext, with
the cipher's own floor beside it: the cipher the SSL listener negotiates (asked by a
Python client: the broker picks by its own order of preference, so confluent-kafka's
librdkafka gets the same) and `openssl speed -evp <cipher>` on 16 KiB blocks (a full
TLS record), as CPU ms per MB. Those figures: floor, then the consume CPU per MB over
each listener and the SSL and SASL_SSL ratios to plaintext.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.bench_broker import RECORD_SIZE, record_pool
from bench.report import print_figures
from common import certs
from common.ports import free_port, wait_for_port
from testkit.procs import BrokerProcess

PARTITIONS = 6
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
WARM_UP = 10_000  # records produced and consumed over each listener before measuring


SASL_USER = ("bench", "bench-secret")


def _broker(root: Path) -> tuple[BrokerProcess, dict[str, dict]]:
    """The broker, and the client settings of each listener."""
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
    """CPU seconds the process's threads have run, to the nanosecond (/proc/<pid>/stat
    counts 10 ms clock ticks, too coarse for a consume that costs the broker 20 ms)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended meanwhile
    return total / 1e9


# TLS cipher suite -> `openssl speed -evp` name (TLS 1.3 suites, then TLS 1.2 ones)
_EVP = (
    (re.compile(r"AES_?128_GCM|AES128-GCM"), "aes-128-gcm"),
    (re.compile(r"AES_?256_GCM|AES256-GCM"), "aes-256-gcm"),
    (re.compile(r"CHACHA20_POLY1305|CHACHA20-POLY1305"), "chacha20-poly1305"),
)


def negotiated_cipher(conf: dict) -> str:
    """The cipher suite the SSL listener of `conf` agrees on with a Python client."""
    host, port = conf["bootstrap.servers"].rsplit(":", 1)
    context = ssl.create_default_context(cafile=conf["ssl.ca.location"])
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.cipher()[0]


def cipher_floor(cipher: str, seconds: int) -> tuple[str, float] | None:
    """(evp name, CPU ms per MB) of `openssl speed -evp` on 16 KiB blocks; None
    without the openssl command or for a cipher it is not mapped to."""
    evp = next((name for pattern, name in _EVP if pattern.search(cipher)), None)
    if evp is None or shutil.which("openssl") is None:
        return None
    out = subprocess.run(
        ["openssl", "speed", "-evp", evp, "-bytes", "16384", "-seconds", str(seconds)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rate = re.search(r"([\d.]+)k\s*$", out.strip())  # the last line: thousands of bytes/s
    if rate is None:
        raise RuntimeError(f"cannot read openssl speed's output: {out[-200:]!r}")
    return evp, 1e6 / (float(rate.group(1)) * 1000) * 1000


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


def run(records: int, repeats: int) -> tuple[dict, str]:
    """{(listener, op): [(records/s, broker CPU s per MB), ...]} over `repeats`, and
    the cipher suite the SSL listener negotiates."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    mb = records * RECORD_SIZE / 1e6
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        broker, clients = _broker(Path(tmp))
        try:
            cipher = negotiated_cipher(clients["SSL"])
            print(f"SSL listener's cipher suite: {cipher}", flush=True)
            for name, conf in clients.items():
                # Not measured: what a first client costs once (the consumer's
                # coordinator lookup creates __consumer_offsets, 50 partitions).
                produce(conf, f"warm-up-{name.lower()}", WARM_UP)
                consume(conf, f"warm-up-{name.lower()}", WARM_UP)
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
    return out, cipher


def figures(mode: str) -> list[dict]:
    records, repeats = {"quick": (300_000, 1), "default": (1_000_000, 3), "full": (3_000_000, 5)}[
        mode
    ]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results, cipher = run(records, repeats)
    median = statistics.median
    out = consume_cpu_figures(results, cipher, 1 if mode == "quick" else 3)
    targets = {"produce": ">= 0.7", "consume": ">= 0.5"}
    for op in ("produce", "consume"):
        plain = results[("PLAINTEXT", op)]
        for name in LISTENERS:
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


def consume_cpu_figures(results: dict, cipher: str, floor_seconds: int) -> list[dict]:
    """Issue 39's figures: the cipher's floor, the broker's CPU per MB consumed over
    each listener, and the SSL and SASL_SSL ones over plaintext's."""
    median = statistics.median
    out = []
    floor = cipher_floor(cipher, floor_seconds)
    if floor is None:
        print(f"no cipher floor: no openssl command, or {cipher} is not mapped", flush=True)
    else:
        evp, ms = floor
        out.append(
            {
                "area": "tls",
                "metric": f"cipher floor: openssl speed -evp {evp}, 16 KiB blocks ({cipher})",
                "value": ms,
                "unit": "ms CPU per MB",
                "detail": "one core, the CPU time of the encryption alone: what the broker "
                "cannot go below per MB sent over TLS",
            }
        )
    per_mb = {name: [r[1] * 1000 for r in results[(name, "consume")]] for name in LISTENERS}
    for name in LISTENERS:
        out.append(
            {
                "area": "tls",
                "metric": f"broker CPU per MB consumed over {name}",
                "value": median(per_mb[name]),
                "unit": "ms CPU per MB",
                "detail": "runs: " + ", ".join(f"{x:.3f}" for x in per_mb[name]),
            }
        )
    plain = median(per_mb["PLAINTEXT"])
    for name in ("SSL", "SASL_SSL"):
        secure = median(per_mb[name])
        out.append(
            {
                "area": "tls",
                "metric": f"broker CPU per MB consumed, {name} / PLAINTEXT",
                "value": secure / plain,
                "unit": "ratio",
                "target": "<= 2" if name == "SSL" else "",
                "reference": "issue 39",
                "detail": f"medians {secure:.3f} / {plain:.3f} ms per MB"
                + ("" if floor is None else f"; the cipher's floor {floor[1]:.3f} ms per MB"),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one short run")
    args = ap.parse_args()
    print_figures(figures("quick" if args.quick else "default"))


if __name__ == "__main__":
    main()
