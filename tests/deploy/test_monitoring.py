"""deploy/monitoring: the alert rules, their unit tests and the scrape configuration
pass promtool; every metric the rules and the dashboard query is one a real broker
and a real agent export; the dashboard is a Grafana dashboard Grafana can import."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from common.ports import free_port
from testkit.agent import AgentProcess
from testkit.kafka import consume_and_commit
from testkit.procs import wait_until
from testkit.scrape import scrape

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "deploy" / "monitoring"
ALERTS = MONITORING / "alerts.yml"
DASHBOARD = MONITORING / "logflume-dashboard.json"
METRIC_NAME = re.compile(r"\blogflume_[a-z_]+")
TOPIC, GROUP, LINES = "nginx-access", "monitoring-test", 20

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      web: {{type: tail, paths: ["{log}"], start_at: beginning, channels: [spool],
             interceptors: [{{type: nginx}}]}}
    channels:
      spool: {{type: file, checkpoint_interval: 0.1s}}
    sinks:
      to-broker: {{type: kafka, channel: spool, topic: {topic}, bootstrap_servers: "{bootstrap}",
                   linger_ms: 2, producer: {{statistics.interval.ms: "500"}}}}
"""


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    # `make test` installs it (deploy/system-deps.sh): missing is a failure, not a skip
    assert path, "promtool not found: install the Debian package prometheus (make system-deps)"
    return path


def run_promtool(promtool: str, *args: str) -> None:
    result = subprocess.run(
        [promtool, *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["check", "rules", "deploy/monitoring/alerts.yml"],
        ["test", "rules", "deploy/monitoring/alerts_test.yml"],
        ["check", "config", "deploy/monitoring/prometheus.yml"],
    ],
    ids=["check-rules", "test-rules", "check-config"],
)
def test_promtool_accepts(promtool, args):
    run_promtool(promtool, *args)


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_queries(board: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target."""
    return [
        (f"panel {panel['id']} {panel['title']!r} {target['refId']}", target["expr"])
        for panel in board["panels"]
        for target in panel.get("targets", [])
    ]


def test_dashboard_is_an_importable_grafana_dashboard():
    board = dashboard()
    assert board["schemaVersion"] >= 36 and board["uid"] and board["title"]
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), ids
    cells: dict[tuple[int, int], int] = {}
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= pos.keys() and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"panels {cells[x, y]} and {panel['id']} overlap"
                cells[x, y] = panel["id"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip() and target["refId"], panel["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"


def test_dashboard_queries_are_valid_promql(promtool, tmp_path):
    """Each expression, with Grafana's variables given values, as a recording rule:
    `promtool check rules` parses it."""
    grafana = {"$__rate_interval": "1m", "$broker": ".+", "$agent": ".+"}
    rules = []
    for n, (_, expr) in enumerate(dashboard_queries(dashboard())):
        for name, value in grafana.items():
            expr = expr.replace(name, value)
        assert "$" not in expr, expr
        rules.append({"record": f"dashboard:query_{n}", "expr": expr})
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    run_promtool(promtool, "check", "rules", str(path))


def nginx_line(i: int) -> str:
    return (
        f'192.0.2.{i % 250} - - [10/Oct/2025:13:55:{i % 60:02d} +0000] "GET /item/{i} HTTP/1.1" '
        f'200 {100 + i} "-" "curl/8.0"\n'
    )


def exposed_names(text: str) -> set[str]:
    """Every series name a /metrics text declares, samples or not (a family with
    labels and nothing counted yet, like request errors, has none): a counter's
    name ends in _total, a histogram is its _bucket, _sum and _count series."""
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
        else:
            names.add(family.name)
    return names


def audit_names(bootstrap: str) -> set[str]:
    """The series names `logflume audit --serve` exports after a round."""
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "logflume", "audit", "--serve", "--bootstrap-server", bootstrap,
         "--listen", f"127.0.0.1:{port}", "--interval", "0.5"],
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:

        def reconciled() -> bool:
            try:
                return bool(scrape(port).get("logflume_audit_last_success_timestamp_seconds"))
            except OSError:
                return False

        wait_until(reconciled, what="a round of logflume audit --serve")
        return exposed_names(scrape(port).text)
    finally:
        serve.terminate()
        serve.communicate(timeout=60)


@pytest.fixture
def exposition(tmp_path, broker_factory) -> set[str]:
    """The series names of a broker, an agent and the audit that went through a
    workload: the agent tails nginx lines (one unparsable) through a file channel to
    the broker, a consumer group reads and commits them, `logflume audit --serve`
    reconciles."""
    metrics_port = free_port()
    broker = broker_factory(settings={"metrics.listen": f"127.0.0.1:{metrics_port}"})
    log = tmp_path / "access.log"
    log.write_text("".join(nginx_line(i) for i in range(LINES - 1)) + "not an nginx line\n")
    text = PIPELINE.format(log=log, topic=TOPIC, bootstrap=broker.bootstrap)
    agent = AgentProcess(tmp_path, text).start()
    try:
        wait_until(
            lambda: (
                agent.metric("logflume_agent_sink_events_out_total", component="to-broker") == LINES
            ),
            what=lambda: f"{LINES} lines delivered; agent log:\n{agent.log_text()}",
        )
        # librdkafka's statistics arrive every statistics.interval.ms
        wait_until(
            lambda: "logflume_agent_kafka_broker_up" in scrape(agent.metrics_port).names(),
            what="the producer's statistics",
        )
        consume_and_commit(broker.bootstrap, TOPIC, GROUP, LINES)
        agent_names = exposed_names(scrape(agent.metrics_port).text)
    finally:
        agent.stop()
    samples = scrape(metrics_port)
    assert samples.get("logflume_broker_group_lag", group=GROUP, topic=TOPIC, partition="0") == 0
    return exposed_names(samples.text) | agent_names | audit_names(broker.bootstrap)


def test_every_metric_queried_is_exported(exposition):
    alerts = ALERTS.read_text()
    board = dashboard()
    used = {name: "alerts.yml" for name in METRIC_NAME.findall(alerts)}
    for where, expr in dashboard_queries(board):
        used.update((name, f"dashboard {where}") for name in METRIC_NAME.findall(expr))
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            used.update((n, f"variable {variable['name']}") for n in METRIC_NAME.findall(query))
    # guards the regex itself: a rule and a histogram query of each kind are among them
    assert {"logflume_broker_active_controller", "logflume_agent_channel_disk_full"} <= set(used)
    assert "logflume_broker_request_duration_seconds_bucket" in used
    unknown = {name: where for name, where in used.items() if name not in exposition}
    assert not unknown, f"not exported by the broker, the agent or the audit: {unknown}"
