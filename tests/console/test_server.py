"""The console server's JSON and pages, in-process against a fake KafkaView (no broker)
and an agent's real /metrics and /health server (agent.metrics.Registry served by
common.prometheus.MetricsServer); its login gate with a real auth file."""

import asyncio
import base64
import os
import ssl

import pytest
from aiohttp.test_utils import TestClient, TestServer
from confluent_kafka import KafkaError, KafkaException

from agent.metrics import Registry
from common.prometheus import MetricsServer
from console import auth
from console.auth import COOKIE, AuthFile, Gate, hash_password, hash_token
from console.server import Console, login_page, make_app, tls_context

TOKEN = "t0ken-" * 6


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

    def messages(self, topic, partition, n, **seek):
        return {"topic": topic, "partition": partition, "records": [{"offset": 99}], **seek}

    def configs(self, kind, name):
        return {"type": kind, "name": name, "configs": []}

    def close(self):
        pass


def run(coro):
    return asyncio.run(coro)


async def _with_console(view, agents, check, gate=None):
    console = Console(view, agents, [], refresh=0.2)
    client = TestClient(TestServer(make_app(console, gate)))
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


def test_message_browser_and_configs_check_their_parameters():
    async def check(client, console):
        ok = await (await client.get("/api/messages?topic=t&partition=0&n=5")).json()
        assert ok["data"]["records"] == [{"offset": 99}]
        ok = await (await client.get("/api/messages?topic=t&from=offset&at=7")).json()
        assert ok["data"]["offset"] == 7
        query = "topic=t&from=timestamp&at=2026-11-29T07:00:00Z"
        ok = await (await client.get(f"/api/messages?{query}")).json()
        assert ok["data"]["timestamp"] == 1795935600000
        for query in (
            "topic=t&partition=x",
            "partition=0",
            "topic=t&n=0",
            "topic=t&n=501",
            "topic=t&from=offset",
            "topic=t&from=timestamp&at=yesterday",
            "topic=t&from=middle",
        ):
            resp = await client.get(f"/api/messages?{query}")
            assert resp.status == 400 and (await resp.json())["error"]
        ok = await (await client.get("/api/configs?type=broker&name=0")).json()
        assert ok["data"] == {"type": "broker", "name": "0", "configs": []}
        for query in ("type=group&name=g", "type=topic", "type=broker&name=b"):
            resp = await client.get(f"/api/configs?{query}")
            assert resp.status == 400 and (await resp.json())["error"]
        session = await (await client.get("/api/session")).json()
        assert session == {"login": False, "user": None}

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


def _gate(tmp_path):
    path = tmp_path / "console.auth"
    path.write_text(f"alice:{hash_password('s3cret')}\nci:{hash_token(TOKEN)}\n")
    os.chmod(path, 0o600)
    return Gate(AuthFile.load(path), login_page(), secure_cookie=False)


def test_the_gate_lets_in_logins_tokens_and_basic_credentials(tmp_path, monkeypatch):
    monkeypatch.setattr(auth, "FAILED_LOGIN_DELAY", 0)

    async def check(client, console):
        resp = await client.get("/api/cluster")
        assert resp.status == 401 and (await resp.json())["error"] == "login required"
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        resp = await client.get("/", allow_redirects=False)
        assert resp.status == 303 and resp.headers["Location"] == "/login"
        for open_path in ("/health", "/login", "/static/console.css"):
            assert (await client.get(open_path)).status == 200, open_path
        login = await client.get("/login")
        assert "frame-ancestors 'none'" in login.headers["Content-Security-Policy"]
        assert 'id="login-error" hidden' in await login.text()

        refused = await client.post(
            "/login", data={"user": "alice", "password": "wrong"}, allow_redirects=False
        )
        assert refused.status == 200 and COOKIE not in refused.cookies
        assert 'id="login-error" hidden' not in await refused.text()
        foreign = await client.post(
            "/login",
            data={"user": "alice", "password": "s3cret"},
            headers={"Origin": "http://evil.example"},
            allow_redirects=False,
        )
        assert foreign.status == 403

        ok = await client.post(
            "/login", data={"user": "alice", "password": "s3cret"}, allow_redirects=False
        )
        assert ok.status == 303 and ok.headers["Location"] == "/"
        cookie = ok.cookies[COOKIE]
        assert cookie["httponly"] and cookie["samesite"] == "Strict"
        assert (await client.get("/api/cluster")).status == 200  # the client keeps the cookie
        assert (await (await client.get("/api/session")).json())["user"] == "alice"
        assert (await client.get("/")).status == 200
        await client.post("/logout", allow_redirects=False)
        assert (await client.get("/api/cluster")).status == 401

        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert (await client.get("/api/cluster", headers=bearer)).status == 200
        wrong = {"Authorization": "Bearer " + "x" * 36}
        assert (await client.get("/api/cluster", headers=wrong)).status == 401
        basic = "Basic " + base64.b64encode(b"alice:s3cret").decode()
        assert (await client.get("/api/groups", headers={"Authorization": basic})).status == 200
        for bad in (b"alice:nope", b"alice", b"ci:" + TOKEN.encode()):
            header = {"Authorization": "Basic " + base64.b64encode(bad).decode()}
            assert (await client.get("/api/groups", headers=header)).status == 401
        garbled = {"Authorization": "Basic !!!"}
        assert (await client.get("/api/groups", headers=garbled)).status == 401

    run(_with_console(FakeView(), [], check, gate=_gate(tmp_path)))


def test_tls_material_as_the_broker_has_it(tmp_path):
    from common import certs

    ca = certs.new_ca()
    combined = certs.write_keystore(tmp_path, "console", certs.issue(ca, "localhost", server=True))
    assert isinstance(tls_context(str(combined), None), ssl.SSLContext)
    assert isinstance(
        tls_context(str(tmp_path / "console.crt"), str(tmp_path / "console.key")), ssl.SSLContext
    )
    with pytest.raises(ValueError, match="not a PEM certificate and its private key"):
        tls_context(str(tmp_path / "console.crt"), None)  # the key is missing
    with pytest.raises(ValueError, match="--tls-cert .*missing.pem: no such file"):
        tls_context(str(tmp_path / "missing.pem"), None)
