"""`sample` interceptor: 1 event in N kept, by count or by the hash of a key; what it
drops is settled and counted, and the runtime counts it as filtered (metrics and the
audit's source tier)."""

import asyncio
import textwrap

import xxhash

from agent.api import Ack, Event
from agent.config import compile_text
from agent.interceptors.sample import Sample
from agent.runtime import AgentRuntime
from agent.source_audit import SourceTally
from tests.agent import fakes
from tests.agent.interceptors.pipelines import FIRST_LINE, WHERE, compile_interceptor
from tests.sources.harness import FakeMetrics, make_context

SAMPLED = "logflume_agent_sampled_out_total"


def sampler(metrics=None, **config) -> Sample:
    return Sample(Sample.Config(**config), make_context("/nonexistent", "smp", metrics))


def numbered(start, stop, settled=None, **record):
    out = []
    for i in range(start, stop):
        ack = Ack(lambda i=i: settled.append(i)) if settled is not None else None
        out.append(Event(b"%d" % i, record=dict(record) or None, ack=ack))
    return out


def test_without_a_key_every_nth_event_is_kept_across_batches():
    metrics, settled = FakeMetrics(), []
    s = sampler(metrics, rate=3)
    kept = []
    for start, stop in ((0, 4), (4, 5), (5, 11), (11, 11), (11, 20)):
        kept += [int(e.body) for e in s.intercept(numbered(start, stop, settled))]
    assert kept == [0, 3, 6, 9, 12, 15, 18]
    assert sorted(settled) == sorted(set(range(20)) - set(kept))  # dropped ones settled
    assert metrics.value(SAMPLED, component="smp") == 13


def test_rate_one_keeps_everything():
    metrics = FakeMetrics()
    batch = numbered(0, 5)
    assert sampler(metrics, rate=1).intercept(batch) == batch
    assert sampler(metrics, rate=1, key="client").intercept(batch) == batch
    assert metrics.value(SAMPLED) == 0


def keeps(value: str, rate: int) -> bool:
    """The documented rule: XXH64 (seed 0) of the value's UTF-8 text, modulo the rate."""
    return xxhash.xxh64_intdigest(value.encode()) % rate == 0


def test_with_a_key_all_events_of_one_value_are_kept_or_dropped_together():
    rate = 4
    clients = [f"203.0.113.{i}" for i in range(40)]
    assert 0 < sum(keeps(c, rate) for c in clients) < len(clients)
    s = sampler(rate=rate, key="client")
    batch = [Event(b"%d" % n, record={"client": c, "n": n}) for n in range(3) for c in clients]
    kept = s.intercept(batch)
    assert [e.record["client"] for e in kept] == [
        c for _ in range(3) for c in clients if keeps(c, rate)
    ]
    # the same decision for the same value in another batch, another instance, another host
    again = sampler(rate=rate, key="client").intercept(
        [Event(b"", record={"client": c}) for c in clients]
    )
    assert [e.record["client"] for e in again] == [c for c in clients if keeps(c, rate)]


def test_a_key_keeps_about_one_value_in_rate():
    s = sampler(rate=10, key="session")
    kept = s.intercept([Event(b"", record={"session": f"s-{i}"}) for i in range(20_000)])
    assert 1_700 < len(kept) < 2_300


def test_the_key_is_the_records_field_else_the_header_else_counting():
    rate = 2
    in_record = Event(b"1", {"host": "web-2"}, {"host": "web-1"})
    in_header = Event(b"2", {"host": "web-1"})
    null_field = Event(b"3", {"host": "web-1"}, {"host": None})
    numbers = Event(b"4", record={"host": 1234})  # non-text values: their JSON text
    s = sampler(rate=rate, key="host")
    kept = s.intercept([in_record, in_header, null_field, numbers])
    expected = [e for e in (in_record, in_header, null_field) if keeps("web-1", rate)]
    expected += [numbers] if keeps("1234", rate) else []
    assert kept == expected
    # events without the key at all are sampled by counting, 1 in `rate`
    s = sampler(rate=3, key="session")
    assert [int(e.body) for e in s.intercept(numbered(0, 7))] == [0, 3, 6]


def test_validate_and_errors():
    assert Sample.validate(Sample.Config(rate=1)) == []
    assert Sample.validate(Sample.Config(rate=0)) == ["rate: must be at least 1"]
    assert Sample.validate(Sample.Config(rate=2, key="")) == ["key: empty"]
    _, errors = compile_interceptor("type: sample")
    assert errors == [f"pipelines.yaml:{FIRST_LINE}:13: {WHERE}.rate: missing required key"]
    _, errors = compile_interceptor("type: sample\nrate: -1")
    assert errors == [f"pipelines.yaml:{FIRST_LINE + 1}:19: {WHERE}.rate: must be at least 1"]
    config, errors = compile_interceptor("type: sample\nrate: 10\nkey: client")
    assert errors == [] and (config.rate, config.key) == (10, "client")


PIPELINE = """
agents:
  a:
    shutdown_grace: 2s
    sources:
      sampled: {type: test-gen, count: 40, batch: 5, channels: [m],
                interceptors: [{type: sample, rate: 4}]}
    channels:
      m: {type: memory}
    sinks:
      sampled-out: {type: test-collect, channel: m}
"""


async def test_the_runtime_counts_what_sample_drops_as_filtered(tmp_path):
    agents, errors = compile_text(textwrap.dedent(PIPELINE), "pipelines.yaml")
    assert errors == []
    rt = AgentRuntime(agents["a"], tmp_path / "state", None)
    tally = rt.source_tallies["sampled"] = SourceTally("sampled")  # as an auditing sink would
    await rt.start()
    try:
        for _ in range(500):
            if fakes.SETTLED.get("sampled") == 40:
                break
            await asyncio.sleep(0.02)
        assert fakes.SETTLED["sampled"] == 40  # the sink's 10 and the sampler's 30
        assert fakes.DELIVERED["sampled-out"] == [b"line %d" % i for i in range(0, 40, 4)]
        value = rt.registry.value
        assert value("logflume_agent_source_events_filtered_total", component="sampled") == 30
        assert value(SAMPLED, component="sampled.interceptor0") == 30
        totals = tally.totals.values()  # one minute, or two when the run straddles one
        read, filtered = sum(c.read for c in totals), sum(c.filtered for c in totals)
        assert (read, filtered, sum(c.unparsable for c in totals)) == (40, 30, 0)
    finally:
        await rt.shutdown()
