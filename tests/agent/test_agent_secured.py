"""The agent shipping to a secured broker: the kafka sink over SASL_SSL
(SCRAM-SHA-512), its password from the environment. Lines sent over UDP and TCP
reach the topic; a wrong password is reported (log and metric, never the password)
and the agent keeps running; once the password is fixed and the agent reloaded, the
lines sent meanwhile are delivered."""

import signal
import socket

import pytest

from common.ports import free_port
from testkit.agent import AgentProcess, read_topic
from testkit.kafka import create_topic
from testkit.procs import wait_until
from testkit.secured import start_secured_broker

PASSWORD = "web-secret: #1"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    secured = start_secured_broker(tmp_path_factory.mktemp("secured"), {"web": PASSWORD})
    create_topic(secured.plain, "web", 1)
    yield secured
    secured.stop()


def pipeline(secured, udp: int, tcp: int) -> str:
    return f"""
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      udp: {{type: udp, listen: "127.0.0.1:{udp}", channels: [c]}}
      tcp: {{type: tcp, listen: "127.0.0.1:{tcp}", channels: [c]}}
    channels:
      c: {{type: memory}}
    sinks:
      k:
        type: kafka
        channel: c
        topic: web
        format: raw
        bootstrap_servers: "{secured.sasl_ssl}"
        tls: {{ca: "{secured.ca}"}}
        sasl: {{mechanism: SCRAM-SHA-512, username: web, password: "${{LF_TEST_SASL_PASSWORD}}"}}
"""


def test_lines_over_udp_and_tcp_reach_the_topic_over_sasl_ssl(tmp_path, secured, monkeypatch):
    monkeypatch.setenv("LF_TEST_SASL_PASSWORD", PASSWORD)
    udp, tcp = free_port(), free_port()
    agent = AgentProcess(tmp_path, pipeline(secured, udp, tcp)).start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"over udp\n", ("127.0.0.1", udp))
        with socket.create_connection(("127.0.0.1", tcp), timeout=5) as s:
            s.sendall(b"over tcp\n")
        want = {b"over udp", b"over tcp"}
        got = read_topic(secured.plain, "web", lambda m: want <= {x.value() for x in m}, 30)
        assert want <= {m.value() for m in got}
    finally:
        agent.stop()
    assert PASSWORD not in agent.log_text()


def test_a_wrong_password_is_reported_and_the_agent_keeps_running(tmp_path, secured, monkeypatch):
    monkeypatch.setenv("LF_TEST_SASL_PASSWORD", "not the password")
    udp, tcp = free_port(), free_port()
    agent = AgentProcess(tmp_path, pipeline(secured, udp, tcp)).start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"refused\n", ("127.0.0.1", udp))
        wait_until(
            lambda: (
                (agent.metric("logflume_agent_kafka_auth_failures_total", component="k") or 0) > 0
            ),
            30,
            "an authentication failure counted",
        )
        wait_until(
            lambda: (
                (agent.metric("logflume_agent_kafka_auth_failures_total", component="k") or 0) > 3
            ),
            30,
            "more authentication failures",
        )
        assert agent.log_text().count("authentication failed") == 1  # not one per retry
        assert agent.proc.poll() is None and agent.health() == 200
    finally:
        agent.stop()
    assert "not the password" not in agent.log_text()


def test_lines_wait_for_a_fixed_password_and_a_reload(tmp_path, secured):
    """The password from a file (`${file:...}`): wrong, then fixed and reloaded
    (SIGHUP) with the line sent meanwhile still delivered."""
    secret = tmp_path / "sasl-password"
    secret.write_text("wrong\n")
    udp, tcp = free_port(), free_port()
    text = pipeline(secured, udp, tcp).replace("${LF_TEST_SASL_PASSWORD}", f"${{file:{secret}}}")
    agent = AgentProcess(tmp_path, text).start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"kept while refused\n", ("127.0.0.1", udp))
        wait_until(
            lambda: (
                (agent.metric("logflume_agent_kafka_auth_failures_total", component="k") or 0) > 0
            ),
            30,
            "an authentication failure counted",
        )
        secret.write_text(PASSWORD + "\n")
        agent.proc.send_signal(signal.SIGHUP)
        want = {b"kept while refused"}
        got = read_topic(secured.plain, "web", lambda m: want <= {x.value() for x in m}, 30)
        assert want <= {m.value() for m in got}
    finally:
        agent.stop()
