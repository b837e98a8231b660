"""The agent's Registry on prometheus_client, served by common.prometheus.MetricsServer."""

import asyncio
import threading
import urllib.request

import orjson
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import logflume
from agent.metrics import DEFAULT_BUCKETS, Registry
from common.prometheus import MetricsServer


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_exposition_names_types_labels_and_buckets():
    r = Registry()
    r.counter("logflume_agent_events_total", "Events\nin", component='a"b').inc(3)
    r.gauge("logflume_agent_fill", "Fill", component="mem").set(0.5)
    h = r.histogram("logflume_lat_seconds", "Latency", component="k")
    h.observe(0.003)
    h.observe(100)
    text = generate_latest(r.prometheus).decode()
    # the names asked for are the names exposed: `_total` is kept, never doubled
    assert 'logflume_agent_events_total{component="a\\"b"} 3.0' in text.splitlines()
    got = families(text)
    counter = got["logflume_agent_events"]
    assert counter.type == "counter" and counter.documentation == "Events\nin"
    (total,) = [s for s in counter.samples if s.name == "logflume_agent_events_total"]
    assert total.labels == {"component": 'a"b'} and total.value == 3
    assert [(s.labels, s.value) for s in got["logflume_agent_fill"].samples] == [
        ({"component": "mem"}, 0.5)
    ]
    hist = got["logflume_lat_seconds"]
    assert hist.type == "histogram"
    buckets = {s.labels["le"]: s.value for s in hist.samples if s.name.endswith("_bucket")}
    assert list(buckets) == [*(str(float(b)) for b in DEFAULT_BUCKETS), "+Inf"]
    assert buckets["0.0025"] == 0 and buckets["0.005"] == 1 and buckets["30.0"] == 1
    assert buckets["+Inf"] == 2
    by_name = {s.name: s.value for s in hist.samples}
    assert by_name["logflume_lat_seconds_count"] == 2
    assert by_name["logflume_lat_seconds_sum"] == pytest.approx(100.003)


def test_process_python_and_build_info_are_exported():
    got = families(generate_latest(Registry().prometheus).decode())
    assert "process_cpu_seconds" in got and "process_resident_memory_bytes" in got
    assert "python_info" in got
    (info,) = got["logflume_build_info"].samples
    assert info.labels == {"version": logflume.__version__, "component": "agent"}


def test_same_series_is_shared_so_a_restarted_component_keeps_counting():
    r = Registry()
    first = r.counter("x_total", "x", component="a")
    first.inc()
    again = r.counter("x_total", "x", component="a")
    again.inc()
    assert again is first and r.value("x_total", component="a") == 2
    assert r.value("x_total", component="b") is None and r.value("nothing") is None
    r.gauge("g", "g", component="a", path="/p").set(7)
    assert r.value("g", path="/p", component="a") == 7  # label order does not matter


def test_misuse_raises():
    r = Registry()
    r.counter("x_total", "x", component="a")
    with pytest.raises(ValueError, match="registered as counter"):
        r.gauge("x_total", "x", component="a")
    with pytest.raises(ValueError, match="has labels"):
        r.counter("x_total", "x", component="a", path="/p")
    with pytest.raises(ValueError, match="ends in _total"):
        r.counter("events", "x", component="a")


def test_series_asked_for_from_many_threads_are_one():
    r = Registry()
    start = threading.Barrier(8)

    def work():
        start.wait()
        for _ in range(1000):
            r.counter("t_total", "t", component="c").inc()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert r.value("t_total", component="c") == 8000


def test_metrics_and_health_endpoints():
    r = Registry()
    r.counter("x_total", "x", component="a").inc(2)

    async def main():
        server = MetricsServer(r.prometheus, r.status, "127.0.0.1", 0)
        await server.start()
        base = f"http://127.0.0.1:{server.port}"
        try:
            r.health["sink.k"] = "running"
            ok = await asyncio.to_thread(_get, f"{base}/health")
            r.health["sink.k"] = "restarting"
            bad = await asyncio.to_thread(_get, f"{base}/health")
            metrics = await asyncio.to_thread(_get, f"{base}/metrics")
            om = await asyncio.to_thread(
                _get, f"{base}/metrics", "application/openmetrics-text; version=1.0.0"
            )
        finally:
            await server.stop()
        return ok, bad, metrics, om

    ok, bad, metrics, om = asyncio.run(main())
    assert ok[0] == 200
    assert orjson.loads(ok[1]) == {"status": "ok", "components": {"sink.k": "running"}}
    assert bad[0] == 503
    assert orjson.loads(bad[1]) == {"status": "degraded", "components": {"sink.k": "restarting"}}
    assert "version=0.0.4" in metrics[2]
    (sample,) = [s for s in families(metrics[1].decode())["x"].samples if s.name == "x_total"]
    assert sample.labels == {"component": "a"} and sample.value == 2
    assert om[2].startswith("application/openmetrics-text")
    assert b'x_total{component="a"} 2.0' in om[1] and om[1].endswith(b"# EOF\n")


def _get(url, accept=None):
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type")
