import asyncio
import urllib.request

from agent.metrics import MetricsServer, Registry
from common.hostport import free_port


def test_text_format_0_0_4():
    r = Registry()
    r.counter("logflume_agent_events_total", "Events\nin", component='a"b').inc(3)
    r.gauge("logflume_agent_fill", "Fill", component="mem").set(0.5)
    h = r.histogram("logflume_lat_seconds", "Latency", component="k")
    h.observe(0.003)
    h.observe(100)
    text = r.render()
    assert text.splitlines() == [
        "# HELP logflume_agent_events_total Events in",
        "# TYPE logflume_agent_events_total counter",
        'logflume_agent_events_total{component="a\\"b"} 3',
        "# HELP logflume_agent_fill Fill",
        "# TYPE logflume_agent_fill gauge",
        'logflume_agent_fill{component="mem"} 0.5',
        "# HELP logflume_lat_seconds Latency",
        "# TYPE logflume_lat_seconds histogram",
        'logflume_lat_seconds_bucket{component="k",le="0.001"} 0',
        'logflume_lat_seconds_bucket{component="k",le="0.0025"} 0',
        *[
            f'logflume_lat_seconds_bucket{{component="k",le="{b}"}} 1'
            for b in (
                "0.005",
                "0.01",
                "0.025",
                "0.05",
                "0.1",
                "0.25",
                "0.5",
                "1",
                "2.5",
                "5",
                "10",
                "30",
            )
        ],
        'logflume_lat_seconds_bucket{component="k",le="+Inf"} 2',
        'logflume_lat_seconds_sum{component="k"} 100.003',
        'logflume_lat_seconds_count{component="k"} 2',
    ]


def test_same_series_is_shared_and_health_endpoint():
    r = Registry()
    r.counter("x_total", "x", component="a").inc()
    r.counter("x_total", "x", component="a").inc()
    assert r.value("x_total", component="a") == 2
    port = free_port()

    async def main():
        server = MetricsServer(r, "127.0.0.1", port)
        await server.start()
        try:
            r.health["sink.k"] = "running"
            ok = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/health")
            r.health["sink.k"] = "restarting"
            bad = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/health")
            metrics = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics")
        finally:
            await server.stop()
        return ok, bad, metrics

    ok, bad, metrics = asyncio.run(main())
    assert ok[0] == 200 and b'"running"' in ok[1]
    assert bad[0] == 503
    assert b'x_total{component="a"} 2' in metrics[1]
    assert "version=0.0.4" in metrics[2]


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type")
