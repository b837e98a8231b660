"""The runtime in-process with test plugins: acks, interceptors, restart, reload."""

import asyncio
import json
import logging
import subprocess
import sys
import textwrap

from agent.config import compile_text
from agent.runtime import AgentRuntime
from tests.agent import fakes

PIPELINE = """
agents:
  a:
    shutdown_grace: 2s
    sources:
      {src}: {{type: test-gen, count: 40, batch: 5, channels: [m1, m2], interceptors: [{{type: test-drop-odd}}]}}
    channels:
      m1: {{type: memory, capacity: 10}}
      m2: {{type: {ch2}}}
    sinks:
      {k1}: {{type: test-collect, channel: m1, fail_first: 2}}
      {k2}: {{type: test-collect, channel: m2}}
"""


def spec_for(tmp_path, src, k1, k2, ch2="memory"):
    text = textwrap.dedent(PIPELINE).format(src=src, k1=k1, k2=k2, ch2=ch2)
    path = tmp_path / "pipelines.yaml"
    path.write_text(text)
    agents, errors = compile_text(text, str(path))
    assert errors == []
    return agents["a"], path


async def wait_for(predicate, seconds=10.0):
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


async def test_fan_out_interceptor_sink_crash_restart_and_acks(tmp_path, caplog):
    spec, path = spec_for(tmp_path, "g1", "k1", "k2")
    rt = AgentRuntime(spec, tmp_path / "state", path)
    with caplog.at_level(logging.ERROR):
        await rt.start()
        evens = [f"line {i}".encode() for i in range(0, 40, 2)]
        await wait_for(lambda: fakes.DELIVERED.get("k1") == evens)
        await wait_for(lambda: fakes.DELIVERED.get("k2") == evens)
        # every event settled: odd ones by the interceptor, even ones by both sinks
        await wait_for(lambda: fakes.SETTLED["g1"] == 40)
        assert (
            rt.registry.value("logflume_agent_source_events_filtered_total", component="g1") == 20
        )
        assert rt.registry.value("logflume_agent_sink_rollbacks_total", component="k1") == 2
        assert rt.registry.health["sink.k1"] == "running"
        await rt.shutdown()
    assert "sink.k1 crashed" in caplog.text


async def test_reload_restarts_only_what_changed_and_rejects_bad_files(tmp_path, caplog):
    spec, path = spec_for(tmp_path, "g2", "k3", "k4")
    rt = AgentRuntime(spec, tmp_path / "state", path)
    await rt.start()
    await wait_for(lambda: fakes.SETTLED.get("g2") == 40)
    k3_task, source_task = rt.sinks["k3"].task, rt.sources["g2"].task

    path.write_text(path.read_text().replace("m2: {type: memory}", "m2: {type: memroy}"))
    with caplog.at_level(logging.ERROR):
        assert not await rt.reload()
    assert "reload rejected" in caplog.text and "memroy" in caplog.text

    path.write_text(path.read_text().replace("{type: memroy}", "{type: file}"))
    assert await rt.reload()
    assert rt.sinks["k3"].task is k3_task  # m1 and its sink untouched
    assert rt.sources["g2"].task is not source_task  # writes to the changed m2
    assert type(rt.channels["m2"]).__name__ == "FileChannel"
    await rt.shutdown()


async def test_health_waits_for_sources_that_signal_readiness(tmp_path):
    text = """
agents:
  a:
    sources:
      late: {type: test-late-ready, channels: [m]}
      gen: {type: test-gen, count: 1, channels: [m]}
    channels:
      m: {type: memory}
    sinks:
      k5: {type: test-collect, channel: m}
"""
    agents, errors = compile_text(text, "inline.yaml")
    assert errors == []
    rt = AgentRuntime(agents["a"], tmp_path / "state", None)
    gate = fakes.GATES.setdefault("late", asyncio.Event())
    await rt.start()
    await wait_for(lambda: fakes.SETTLED.get("gen") == 1)
    assert rt.registry.health["source.late"] == "starting"
    assert rt.registry.health["source.gen"] == "running"
    assert not rt.registry.healthy()
    gate.set()
    await wait_for(lambda: rt.registry.health["source.late"] == "running")
    assert rt.registry.healthy()
    await rt.shutdown()


def test_each_source_tier_is_published_by_the_first_auditing_sink_reading_its_lines(tmp_path):
    text = textwrap.dedent(
        """
        agents:
          a:
            sources:
              s1: {type: test-gen, count: 1, channels: [c1, c2]}
              s2: {type: test-gen, count: 1, channels: [c3]}
              s3: {type: test-gen, count: 1, channels: [c4]}
            channels: {c1: {type: memory}, c2: {type: memory}, c3: {type: memory}, c4: {type: memory}}
            sinks:
              quiet: {type: kafka, channel: c1, topic: t, audit: false}
              first: {type: kafka, channel: c2, topic: t}
              other: {type: kafka, channel: c3, topic: t}
              files: {type: test-collect, channel: c4}
        """
    )
    agents, errors = compile_text(text)
    assert errors == []
    rt = AgentRuntime(agents["a"], tmp_path / "state", None)
    assert [rt._audit_publisher(s) for s in ("s1", "s2", "s3")] == ["first", "other", None]


def test_tune_gc_freezes_what_startup_loaded_and_raises_the_young_threshold():
    """In a child process: the test's own collector stays as it is."""
    code = (
        "import gc, json; from agent.runtime import tune_gc, GC_YOUNG_THRESHOLD; "
        "before = gc.get_threshold(); tune_gc(); "
        "print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count(), "
        "GC_YOUNG_THRESHOLD]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    before, after, frozen, young = json.loads(out.stdout)
    assert after == [young, before[1], before[2]]
    assert young > before[0]
    assert frozen > 1000  # the modules imported so far
