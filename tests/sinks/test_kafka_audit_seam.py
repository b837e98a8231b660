"""The audit across the seam: the kafka sink (in this process) delivers lines of
three hosts to a real broker, publishing its totals; `logflume audit --recount` (a
subprocess, as an operator runs it) recounts the topic and reconciles.

Faults are injected under the sink, in its producer: a line the sink counted as
delivered is not produced at all (a loss after the agent), or one is lost and
another produced twice (the count still matches; the checksum does not). The lines
carry a time of their own ten minutes back, so their minute is past its grace at
once."""

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from agent.api import Ack, Event
from agent.channels.memory import MemoryChannel
from common.aio import within
from common.audit import MINUTE_MS, minute_of, minute_text
from sinks.kafka import KafkaSink
from sinks.kafka.producer import SinkProducer
from tests.agent.helpers import context

TOPIC = "audited"


def lines(host: str, n: int, when: int, ack: Ack) -> list[Event]:
    headers = {"host": host}
    return [Event(f"{host} line {i}".encode(), headers, None, ack, when + i) for i in range(n)]


class Faults:
    """Under the sink's producer: `drop` values are never produced (their delivery
    report says delivered), `twice` values are produced two times."""

    def __init__(self, monkeypatch):
        self.drop: set[bytes] = set()
        self.twice: set[bytes] = set()
        init = SinkProducer.__init__
        faults = self

        def patched(producer, settings):
            init(producer, settings)
            real = producer.produce

            def produce(topic, value, *args, **kwargs):
                if topic == TOPIC and value in faults.drop:
                    faults.drop.discard(value)
                    args[2](None, None)  # (key, partition, on_delivery, ...): "delivered"
                    return
                real(topic, value, *args, **kwargs)
                if topic == TOPIC and value in faults.twice:
                    faults.twice.discard(value)
                    real(topic, value, *args[:2], lambda err, msg: None, *args[3:], **kwargs)

            producer.produce = produce

        monkeypatch.setattr(SinkProducer, "__init__", patched)


def audit(bootstrap: str, *args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "logflume", "audit", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert proc.returncode in (0, 3) and proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
async def test_the_audit_finds_the_one_line_lost_and_the_one_swapped(
    tmp_path, broker, monkeypatch, delivery
):
    faults = Faults(monkeypatch)
    when = minute_of(int(time.time() * 1000)) - 10 * MINUTE_MS
    delivered = asyncio.Event()
    ack = Ack(delivered.set, copies=3 * 500)
    batches = [lines(host, 500, when, ack) for host in ("web-1", "web-2", "web-3")]
    faults.drop = {b"web-2 line 17", b"web-3 line 3"}
    faults.twice = {b"web-3 line 4"}
    channel = MemoryChannel(MemoryChannel.Config(), context(tmp_path, "mem"))
    channel.delivered_marks = asyncio.get_running_loop().create_future()
    config = KafkaSink.Config(topic=TOPIC, bootstrap_servers=broker.bootstrap, delivery=delivery)
    sink = asyncio.create_task(KafkaSink(config, context(tmp_path, "k")).run(channel))
    try:
        for batch in batches:
            await channel.put(batch)
        await within(delivered.wait(), 60)
    finally:
        sink.cancel()
        await asyncio.gather(sink, return_exceptions=True)
    assert not faults.drop and not faults.twice, "every fault was injected"

    code, report = await asyncio.to_thread(
        audit, broker.bootstrap, "--recount", "--from", "1h", "--format", "json"
    )
    assert code == 3
    assert report["compared"] == ["broker"]
    by_host = {b["host"]: b for b in report["buckets"]}
    assert set(by_host) == {"web-1", "web-2", "web-3"}
    for bucket in by_host.values():
        assert bucket["minute"] == minute_text(when) and bucket["topic"] == TOPIC
        assert bucket["tiers"]["agent"]["count"] == 500
    assert by_host["web-1"]["status"] == "complete"
    assert by_host["web-1"]["tiers"]["broker"] == by_host["web-1"]["tiers"]["agent"]
    assert (by_host["web-2"]["status"], by_host["web-2"]["difference"]) == ("missing", -1)
    assert by_host["web-2"]["tiers"]["broker"]["count"] == 499
    assert by_host["web-3"]["status"] == "checksum differs"
    assert by_host["web-3"]["tiers"]["broker"]["count"] == 500

    code, report = await asyncio.to_thread(
        audit, broker.bootstrap, "--recount", "--host", "web-1", "--format", "json"
    )
    assert code == 0 and [b["status"] for b in report["buckets"]] == ["complete"]
