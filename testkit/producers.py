"""Producers that note every acknowledgement, for the cluster fault tests and benchmarks.

`Producers` runs one idempotent acks=all producer per client library the fault tests
check (`CLIENTS`): confluent-kafka (librdkafka), kafka-python and kafkajs, each writing
`<name>-<seq>` records to partition 0 of one topic from the client namespace of a
`testkit.netns.NetLab`, and records (producer, seq, offset, time) of every
acknowledgement, so a test or benchmark can check that nothing acknowledged was lost
and time how long each client stalled. Without a lab (a cluster on this machine's
loopback), only the two in-process producers run.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer

from testkit.netns import NetLab

CLIENTS = ("ck", "kp", "js")
NODE_DIR = Path(__file__).parents[1] / "tests" / "interop" / "node"


@dataclass
class Ack:
    producer: str
    seq: int
    offset: int
    at: float


@dataclass
class Producers:
    """Three producers, idempotent, acks=all, each writing `<name>-<seq>` records until
    `stop()`: confluent-kafka (`ck`) and kafka-python (`kp`) in threads of this
    process, kafkajs (`js`, tests/interop/node/steady_producer.mjs) as a Node process
    in the lab's client namespace, its outcomes read from its output by a thread
    (`lab` None: no kafkajs producer)."""

    bootstrap: str
    topic: str
    lab: NetLab | None
    root: Path
    acks: list[Ack] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sent: Counter = field(default_factory=Counter)
    done: Counter = field(default_factory=Counter)

    def __post_init__(self):
        self.flush_s = 180.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._confluent, name="ck-producer"),
            threading.Thread(target=self._kafka_python, name="kp-producer"),
        ]
        if self.lab is not None:
            self._threads.append(threading.Thread(target=self._kafkajs, name="js-reader"))
        self._js: subprocess.Popen | None = None

    def start(self) -> Producers:
        if self.lab is not None:
            out = self.root / "kafkajs-producer.jsonl"
            cmd = ["node", str(NODE_DIR / "steady_producer.mjs"), self.bootstrap, self.topic]
            self._js = self.lab.popen("client", [*cmd, "js"], out, cwd=NODE_DIR)
            self._js_out = out
        for t in self._threads:
            t.start()
        return self

    def acked(self) -> int:
        return len(self.acks)

    def first_ack(self, name: str, after: float, before: float = float("inf")) -> float | None:
        """When producer `name` got its first acknowledgement between the two times."""
        with self._lock:
            times = [a.at for a in self.acks if a.producer == name and after < a.at < before]
        return min(times, default=None)

    def _ok(self, name: str, seq: int, offset: int, at: float | None = None) -> None:
        with self._lock:
            self.acks.append(Ack(name, seq, offset, time.time() if at is None else at))
            self.done[name] += 1

    def _fail(self, name: str, seq: int, err) -> None:
        with self._lock:
            self.errors.append(f"{name}-{seq}: {err}")
            self.done[name] += 1

    def _throttle(self, name: str) -> bool:
        """Keep at most 400 records of one producer unanswered."""
        return self.sent[name] - self.done[name] > 400

    def _confluent(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 180000,
                "request.timeout.ms": 10000,
                "topic.metadata.refresh.interval.ms": 1000,
                "retry.backoff.ms": 100,
                "reconnect.backoff.max.ms": 500,
                "error_cb": lambda err: (
                    self.errors.append(f"ck fatal: {err}") if err.fatal() else None
                ),
            }
        )

        def report(err, msg, seq):
            if err is None:
                self._ok("ck", seq, msg.offset())
            else:
                self._fail("ck", seq, err)

        while not self._stop.is_set():
            if self._throttle("ck"):
                p.poll(0.05)
                continue
            seq = self.sent["ck"]
            p.produce(
                self.topic,
                b"ck-%d" % seq,
                partition=0,
                on_delivery=functools.partial(report, seq=seq),
            )
            self.sent["ck"] += 1
            p.poll(0.004)
        p.flush(self.flush_s)

    def _kafka_python(self) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=10000,
            delivery_timeout_ms=180000,
            metadata_max_age_ms=1000,
            retry_backoff_ms=100,
            reconnect_backoff_max_ms=500,
            max_block_ms=120000,
        )
        try:
            while not self._stop.is_set():
                if self._throttle("kp"):
                    time.sleep(0.05)
                    continue
                seq = self.sent["kp"]
                future = p.send(self.topic, value=b"kp-%d" % seq, partition=0)
                self.sent["kp"] += 1
                future.add_callback(lambda md, seq=seq: self._ok("kp", seq, md.offset))
                future.add_errback(lambda e, seq=seq: self._fail("kp", seq, e))
                time.sleep(0.004)
            p.flush(self.flush_s)
        except KafkaTimeoutError:
            pass
        finally:
            p.close(5)

    def _kafkajs(self) -> None:
        """Follow the Node producer's output until it prints `done` or exits."""
        assert self._js is not None  # started before it is followed
        with open(self._js_out, "rb") as f:
            while True:
                line = f.readline()
                if not line.endswith(b"\n"):
                    if self._js.poll() is not None and not line:
                        return
                    f.seek(-len(line), 1)
                    time.sleep(0.05)
                    continue
                try:
                    event = json.loads(line)
                except ValueError:  # a Node warning or stack trace: keep it as an error
                    self.errors.append(f"js output: {line.decode(errors='replace').strip()}")
                    continue
                if event.get("done"):
                    return
                if "seq" not in event:  # one of kafkajs's own log entries
                    continue
                with self._lock:
                    self.sent["js"] += 1
                if "error" in event:
                    self._fail("js", event["seq"], event["error"])
                else:
                    self._ok("js", event["seq"], event["offset"], at=event["at"])

    def stop(self, flush_s: float) -> None:
        self.flush_s = flush_s
        self._stop.set()
        if self._js is not None and self._js.poll() is None:
            self._js.send_signal(signal.SIGTERM)
        for t in self._threads:
            t.join(flush_s + 20)
