"""The console server's JSON and pages, in-process against a fake KafkaView (no broker)
and an agent's real /metrics and /health server (agent.metrics.Registry served by
common.prometheus.MetricsServer)."""

import asyncio

from aiohttp.test_utils import TestClient, TestServer
from confluent_kafka import KafkaError, KafkaException

from agent.metrics import Registry
from common.prometheus import MetricsServer
from console.server import Console, make_app


class FakeView:
    timeout = 1.0

    def __init__(self):
        self.fail = False
        self.high = 100

    def cluster(self):
        if self.fail:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
        return {
            "cluster_id": "c1",
            "controller": 0,
            "brokers": [{"id": 0, "host": "127.0.0.1", "port": 9092}],
            "topics": [
                {
                    "name": "t",
                    "internal": False,
                    "partitions": [
                        {"partition": 0, "leader": 0, "replicas": [0], "isr": [0]}
                        | {"low": 0, "high": self.high}
                    ],
                }
            ],
        }

    def groups(self, highs):
        return [{"group": "g", "state": "STABLE", "lag": highs[("t", 0)] - 70, "partitions": []}]

    def read_stats(self):
        return [{"t": 60.0, "requests": 5}]

    def messages(self, topic, partition, n):
        return {"topic": topic, "partition": partition, "records": [{"offset": 99}]}

    def close(self):
        pass


def run(coro):
    return asyncio.run(coro)


async def _with_console(view, agents, check):
    console = Console(view, agents, [], refresh=0.2)
    client = TestClient(TestServer(make_app(console)))
    await client.start_server()
    try:
        await console.refresh_once()
        await check(client, console)
    finally:
        await client.close()
        await console.stop()


def test_endpoints_answer_from_the_snapshot_with_rates_and_lag():
    view = FakeView()

    async def check(client, console):
        view.high = 130
        await asyncio.sleep(0.05)
        await console.refresh_once()
        cluster = await (await client.get("/api/cluster")).json()
        assert cluster["error"] is None
        topic = cluster["data"]["topics"][0]
        assert topic["name"] == "t" and topic["messages"] == 130
        assert topic["rate"] > 0 and topic["partitions"][0]["size"] is None
        groups = await (await client.get("/api/groups")).json()
        assert groups["data"]["groups"][0]["lag"] == 60
        stats = await (await client.get("/api/stats")).json()
        assert stats["data"]["points"] == [{"t": 60.0, "requests": 5}]
        page = await client.get("/")
        assert "logflume console" in await page.text()
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
        js = await client.get("/static/console.js")
        assert js.status == 200 and "textContent" in await js.text()

    run(_with_console(view, [], check))


def test_a_broker_error_is_shown_and_the_last_data_kept():
    view = FakeView()

    async def check(client, console):
        view.fail = True
        await console.refresh_once()
        cluster = await (await client.get("/api/cluster")).json()
        assert "broker down" in cluster["error"]
        assert cluster["data"]["brokers"][0]["id"] == 0

    run(_with_console(view, [], check))


def test_message_browser_checks_its_parameters():
    async def check(client, console):
        ok = await (await client.get("/api/messages?topic=t&partition=0&n=5")).json()
        assert ok["data"]["records"] == [{"offset": 99}]
        for query in ("topic=t&partition=x", "partition=0", "topic=t&n=0", "topic=t&n=501"):
            resp = await client.get(f"/api/messages?{query}")
            assert resp.status == 400 and (await resp.json())["error"]

    run(_with_console(FakeView(), [], check))


def test_agents_health_and_components_from_a_real_metrics_server():
    registry = Registry()
    registry.health.update({"source.nginx": "running", "sink.out": "restarting"})
    registry.counter("logflume_agent_source_events_in_total", "in", component="nginx").inc(7)
    registry.gauge("logflume_agent_channel_events", "e", component="ch").set(5)
    registry.gauge("logflume_agent_channel_capacity_events", "c", component="ch").set(10)

    async def main():
        server = MetricsServer(registry.prometheus, registry.status, "127.0.0.1", 0)
        await server.start()
        try:
            url = f"http://127.0.0.1:{server.port}"

            async def check(client, console):
                agents = (await (await client.get("/api/agents")).json())["data"]["agents"]
                ours, gone = agents
                assert ours["url"] == url and ours["status"] == "degraded"
                rows = {(c["kind"], c["name"]): c for c in ours["components"]}
                assert rows[("sink", "out")]["state"] == "restarting"
                assert rows[("source", "nginx")]["events_total"] == 7
                assert rows[("channel", "ch")]["fill"] == 0.5
                assert gone["status"] == "unreachable" and gone["error"]

            await _with_console(FakeView(), [url, "http://127.0.0.1:1"], check)
        finally:
            await server.stop()

    run(main())
