"""`logflume up`, driven as a user would: wait for the banner, send lines with nc, read
them back with `logflume consume`, stop it, and check that no process is left.

The demo runs on free ports, from the repository's own pipelines.yaml, and with
--no-spark except in one test (a Spark start costs tens of seconds): that one appends
its own access-log lines and finds their minute's figures in the realtime output.

No test may leave a process behind, even when it fails or pytest is killed: each
`logflume up` dies with the pytest thread that started it (PR_SET_PDEATHSIG, and its
own children die with it the same way), each test's fixture SIGKILLs whatever is left
of its process tree and groups, and after the module a /proc scan looks for any
process still naming one of the module's data directories, kills it and fails.
"""

import ctypes
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from agent.config import compile_file
from common.ports import free_port
from logflume.commands.up import port_free
from logflume.demo_pipeline import DemoConfig
from spark_etl.loggen import MONTHS
from testkit.procs import wait_until
from tests.logflume.proc_scan import alive, all_pids, descendants, in_groups, pgid, wait_gone

REPO = Path(__file__).resolve().parents[2]
DATA_DIRS: list[Path] = []  # every data dir a test of this module gave `logflume up`
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_pytest() -> None:
    """preexec_fn: SIGKILL `logflume up` when the pytest thread that forked it dies
    (a killed or timed-out pytest runs no fixture teardown)."""
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def processes_naming(paths: list[Path]) -> set[int]:
    """Live processes whose command line mentions one of `paths`."""
    needles = [str(p).encode() for p in paths]
    found = set()
    for pid in all_pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if pid != os.getpid() and alive(pid) and any(n in cmdline for n in needles):
            found.add(pid)
    return found


@pytest.fixture(scope="module", autouse=True)
def no_process_left_behind():
    yield
    left = processes_naming(DATA_DIRS)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, f"processes left behind by the up tests: {sorted(left)}"


class Up:
    """A `logflume up` subprocess (in its own session) whose output is collected."""

    def __init__(
        self,
        tmp_path: Path,
        *extra: str,
        config="pipelines.yaml",
        spark=False,
        brokers=1,
        log_format="text",
    ):
        self.broker_port = free_port() if brokers == 1 else free_port_run(brokers)
        self.udp_port, self.metrics_port = free_port(), free_port()
        self.console_port = free_port()
        self.broker_metrics_port = free_port()
        ports = range(self.broker_port, self.broker_port + brokers)
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
        self.data_dir = tmp_path / "data"
        DATA_DIRS.append(self.data_dir)
        cmd = [sys.executable, "-m", "logflume", "--log-format", log_format, "up"]
        cmd += ["--config", config]
        cmd += [] if spark else ["--no-spark"]
        cmd += ["--data-dir", str(self.data_dir), "--broker-port", str(self.broker_port)]
        cmd += ["--udp-port", str(self.udp_port), "--metrics-port", str(self.metrics_port)]
        cmd += ["--console-port", str(self.console_port)]
        cmd += ["--broker-metrics-port", str(self.broker_metrics_port)]
        cmd += ["--audit-port", str(free_port())]
        cmd += ["--rate", "200", *extra]
        cmd += ["--cluster", str(brokers)] if brokers > 1 else []
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_pytest,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if "Ctrl-C stops everything" in line and _from_up(line):  # banner's end
                self.ready.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.2):
            assert self.proc.poll() is None, f"logflume up exited early:\n{self.output}"
            assert time.monotonic() < deadline, f"no ready banner:\n{self.output}"

    def tree(self) -> tuple[set[int], set[int]]:
        """The processes under `logflume up`, and their process groups."""
        pids = descendants(self.proc.pid)
        return pids, {g for g in map(pgid, pids) if g is not None}

    def cleanup(self) -> None:
        """SIGKILL `logflume up`, its process tree and its children's groups."""
        pids, groups = self.tree()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for pid in pids | in_groups(groups):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _from_up(line: str) -> bool:
    """Whether `line` is the supervisor's own, as text (`[up] ...`) or as JSON."""
    return line.startswith("[up]") or (_json_or_none(line) or {}).get("logger") == "up"


def free_port_run(n: int) -> int:
    """The first of `n` consecutive free loopback ports."""
    rng = random.Random()
    while True:
        base = rng.randrange(20000, 60000 - n)
        if all(port_free(p) for p in range(base, base + n)):
            return base


@pytest.fixture
def up_factory(tmp_path):
    started = []

    def make(*extra, **kwargs):
        up = Up(tmp_path, *extra, **kwargs)
        started.append(up)
        return up

    yield make
    for up in started:
        up.cleanup()


def consume(bootstrap: str, topic: str, count: int, timeout_ms: int = 20000) -> list[str]:
    cmd = [sys.executable, "-m", "logflume", "consume", "--bootstrap-server", bootstrap]
    cmd += ["--topic", topic, "--from-beginning", "--max-messages", str(count)]
    cmd += ["--timeout-ms", str(timeout_ms)]
    result = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout_ms / 1000 + 30, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _json_or_none(value: str):
    try:
        return json.loads(value)
    except ValueError:
        return None


def test_demo_end_to_end_then_clean_stop(up_factory):
    up = up_factory()
    up.wait_ready()
    out = up.output
    assert f"echo hello | nc -u -w1 127.0.0.1 {up.udp_port}" in out
    assert f"logflume consume --bootstrap-server {up.bootstrap} --topic netcat" in out
    assert f"console  http://127.0.0.1:{up.console_port}/" in out
    assert f"metrics http://127.0.0.1:{up.broker_metrics_port}/metrics" in out
    pids, groups = up.tree()
    assert len(pids) >= 3  # broker, agent, generator

    # as the banner says, `nc -u -w1`: `-w0` can quit before its stdin was read
    tokens = [f"hello-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    for token in tokens:
        line = up.data_dir / "line.txt"
        line.write_text(f"{token}\n")
        with open(line) as stdin:
            subprocess.run(
                ["nc", "-u", "-w1", "127.0.0.1", str(up.udp_port)],
                stdin=stdin,
                check=True,
                timeout=10,
            )
    assert consume(up.bootstrap, "netcat", 3) == tokens

    # the generator writes ~0.2 % unparsable lines, which the agent forwards as they
    # are (flagged, for the ETL's rejects); every other value is a parsed record
    values = consume(up.bootstrap, "nginx-access", 20)
    records = [r for r in map(_json_or_none, values) if isinstance(r, dict) and "method" in r]
    assert len(values) == 20 and len(records) >= 17, values
    assert all(r["method"] and r["status"] >= 100 and r["path"].startswith("/") for r in records)
    check_console(up)

    up.proc.send_signal(signal.SIGTERM)
    assert up.proc.wait(60) == 0, up.output
    up.reader.join(5)
    assert up.lines[-1].endswith("stopped")
    assert wait_gone(pids | in_groups(groups), timeout=5) == set()


def check_console(up: Up) -> None:
    """The demo's web console answers: its page, and JSON showing the demo's topics,
    its agent (healthy, with its components) and no error."""
    base = f"http://127.0.0.1:{up.console_port}"
    with urllib.request.urlopen(f"{base}/", timeout=10) as resp:
        assert "logflume console" in resp.read().decode()

    def get(part: str) -> dict:
        with urllib.request.urlopen(f"{base}/api/{part}", timeout=10) as resp:
            return json.loads(resp.read())

    def cluster_ready():
        data = get("cluster")["data"]
        return data and {"nginx-access", "netcat"} <= {t["name"] for t in data["topics"]}

    wait_until(cluster_ready, 30, "the console to list the demo's topics")
    assert get("cluster")["error"] is None

    def netcat_size():  # from the demo broker's /metrics, once the test's lines are in
        topics = {t["name"]: t for t in get("cluster")["data"]["topics"]}
        return topics["netcat"]["size"]

    wait_until(netcat_size, 30, "the console to show netcat's size from the broker's metrics")

    def agent_ready():
        agents = (get("agents")["data"] or {}).get("agents") or []
        return agents and agents[0]["status"] == "ok" and agents[0]

    agent = wait_until(agent_ready, 30, "the console to show the agent healthy")
    names = {(c["kind"], c["name"]) for c in agent["components"]}
    assert {("source", "nginx"), ("source", "netcat"), ("channel", "nginx")} <= names
    with urllib.request.urlopen(
        f"{base}/api/messages?topic=netcat&partition=0&n=5", timeout=20
    ) as resp:
        records = json.loads(resp.read())["data"]["records"]
    assert [r["value"] for r in records][-3:] == consume(up.bootstrap, "netcat", 3)


def test_demo_logs_json_lines_when_asked(up_factory):
    """`logflume --log-format json up`: every console line is one JSON object; the
    broker's and the agent's own records (they were given the flag) say which child
    wrote them, the generator's plain lines and the supervisor's messages have the
    same keys."""
    up = up_factory(log_format="json")
    up.wait_ready()
    wait_until(lambda: '"child":"loggen"' in up.output, 60, "a line from the generator")
    up.proc.send_signal(signal.SIGTERM)
    assert up.proc.wait(60) == 0, up.output
    up.reader.join(5)
    rows = [json.loads(line) for line in up.lines]
    assert all({"timestamp", "level", "logger", "message", "pid"} <= r.keys() for r in rows)
    by_child = {}
    for row in rows:
        by_child.setdefault(row.get("child"), []).append(row)
    assert {None, "broker", "web", "loggen"} <= by_child.keys()
    assert any(r["logger"].startswith("broker.") for r in by_child["broker"])
    assert any("agent" in r["logger"] for r in by_child["web"])
    assert {r["logger"] for r in by_child[None]} == {"up"}
    assert rows[-1]["message"] == "stopped"


# (status, body bytes) of the lines the Spark test appends: every status class
APPENDED = [(200, 512), (200, 2048), (204, 0), (301, 178), (304, 0), (404, 153), (403, 90)]
APPENDED += [(503, 61)]


def append_access_lines(log: Path, minute: datetime) -> dict:
    """Append APPENDED to `log` as nginx combined lines stamped inside `minute` (UTC),
    written with a +02:00 offset as a server in that zone would; return the figures
    their per-minute row must show."""
    zone = timezone(timedelta(hours=2))
    lines = []
    for i, (status, size) in enumerate(APPENDED):
        t = (minute + timedelta(seconds=i)).astimezone(zone)
        stamp = f"{t.day:02d}/{MONTHS[t.month - 1]}/{t.year}:{t:%H:%M:%S} {t:%z}"
        lines.append(
            f'198.51.100.{i + 1} - - [{stamp}] "GET /e2e/{i} HTTP/1.1" {status} {size}'
            f' "-" "logflume-e2e" 0.00{i + 1} -\n'
        )
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)  # one write: never inside a generator line
    try:
        os.write(fd, "".join(lines).encode())
    finally:
        os.close(fd)
    expected = {"requests": len(APPENDED), "bytes": sum(size for _, size in APPENDED)}
    for c in (2, 3, 4, 5):
        expected[f"status_{c}xx"] = sum(1 for s, _ in APPENDED if s // 100 == c)
    return expected


def read_stats_until(bootstrap: str, done, deadline: datetime) -> list[dict]:
    """Rows of topic nginx-stats, from the beginning, until `done(rows)` or the wall
    clock reaches `deadline`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test-up", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("nginx-stats", 0, OFFSET_BEGINNING)])
    rows: list[dict] = []
    try:
        while not done(rows) and datetime.now(UTC) < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                rows.append(json.loads(msg.value()))
    finally:
        consumer.close()
    return rows


def test_demo_with_spark_reports_the_minute_stats_of_appended_lines(up_factory):
    """The realtime job's per-minute rows show lines appended to the demo's access log.

    Per-minute rows are per window and host, and every line of the tailed log has the
    same (null) host, so the appended lines are told apart by their minute instead:
    they are stamped in a minute 3-4 minutes ahead, which the traffic generator (it
    writes lines when the clock reaches their time) cannot reach before the reading
    below gives up. That minute's row therefore holds the appended lines and nothing
    else, and its figures must match them exactly: requests, each status class and
    bytes, in the provisional rows (`final: false`, counts so far) published every
    second. A past minute would not do: the watermark (1 minute) drops late lines.
    The price: the future lines push the watermark ~2-3 minutes ahead, so the
    generator's own lines of those minutes are dropped as late; nothing here reads
    them, and the windows the watermark passes are closed and published at once.

    The same run checks the final rows (with the sketches) on the topic and the
    Parquet files; that 40 s of output read like a pipeline (the realtime
    job's progress line every 10 s, no Spark warning that batches fall behind, no
    Spark INFO); then stops the demo with SIGINT (Ctrl-C) and checks that it exits
    0 and leaves no process behind. One Spark start for the module: it is the slow
    part.
    """
    up = up_factory("--rate", "30", spark=True)
    up.wait_ready()
    ready = time.monotonic()
    now = datetime.now(UTC)
    minute = now.replace(second=0, microsecond=0) + timedelta(minutes=4)
    expected = append_access_lines(up.data_dir / "demo" / "access.log", minute)

    def ours(rows):
        return [r for r in rows if datetime.fromisoformat(r["window_start"]) == minute]

    def complete(rows):
        return [r for r in ours(rows) if r["requests"] >= len(APPENDED)]

    def finals(rows):
        return [r for r in rows if r["final"]]

    # the generator writes into `minute` only once the clock reaches it
    deadline = minute - timedelta(seconds=5)
    rows = read_stats_until(up.bootstrap, lambda r: complete(r) and finals(r), deadline)
    found = complete(rows)
    assert found, f"no complete row for {minute} in {ours(rows)}:\n{up.output}"
    row = found[0]
    assert datetime.fromisoformat(row["window_end"]) == minute + timedelta(minutes=1)
    assert row["final"] is False
    assert {k: row[k] for k in expected} == expected
    assert all(r["requests"] <= len(APPENDED) for r in ours(rows))

    final = finals(rows)[0]  # e.g. a minute of the generator's backfill
    assert datetime.fromisoformat(final["window_start"]) < datetime.fromisoformat(
        final["window_end"]
    )
    assert {"unique_clients", "rt_p50", "rt_p95", "rt_p99"} <= final.keys()
    parquet = up.data_dir / "stats" / "minute"
    waited = time.monotonic() + 30
    while not list(parquet.rglob("*.parquet")):
        assert time.monotonic() < waited, "no Parquet minute stats"
        time.sleep(0.5)

    def progress_lines() -> list[str]:
        return re.findall(r"realtime: [\d,]+ lines/s in .* behind the topic's end", up.output)

    # 40 s of output, with the job's progress line every 10 s for most of it (the
    # fleet run, tests/fleet, keeps the realtime job running longer)
    time.sleep(max(0.0, ready + 40 - time.monotonic()))
    wait_until(lambda: len(progress_lines()) >= 3, 120, "3 progress lines", every=1)
    out = up.output
    spark = [line for line in out.splitlines() if line.startswith("[spark]")]
    # the JVM's own notice cannot be configured away. A progress line may end in
    # "falling behind: ..." when the machine is too busy for the trigger: that is the
    # job telling the truth about its speed, not noise, and no test may time it.
    noise = [s for s in spark if "realtime: " not in s and "incubator modules" not in s]
    assert noise == [], out
    pids, groups = up.tree()
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(90) == 0, up.output
    up.reader.join(5)
    assert up.lines[-1].endswith("stopped")
    assert wait_gone(pids | in_groups(groups), timeout=10) == set()


def test_demo_on_a_three_broker_cluster(up_factory):
    from confluent_kafka.admin import AdminClient

    up = up_factory(brokers=3)
    up.wait_ready(timeout=150)
    out = up.output
    assert f"cluster  3 brokers {up.bootstrap}" in out
    assert "replication factor 3, min.insync.replicas=2" in out
    for label in ("[zookeeper]", "[broker-0]", "[broker-1]", "[broker-2]"):
        assert label in out
    topics = AdminClient({"bootstrap.servers": up.bootstrap}).list_topics(timeout=10).topics
    for name in ("nginx-access", "netcat", "nginx-stats"):
        assert all(len(p.replicas) == 3 for p in topics[name].partitions.values()), name

    token = f"hello-{uuid.uuid4().hex[:8]}"
    line = up.data_dir / "line.txt"
    line.write_text(f"{token}\n")
    with open(line) as stdin:
        subprocess.run(
            ["nc", "-u", "-w1", "127.0.0.1", str(up.udp_port)], stdin=stdin, check=True, timeout=10
        )
    assert consume(up.bootstrap, "netcat", 1) == [token]
    assert len(consume(up.bootstrap, "nginx-access", 5)) == 5

    pids, groups = up.tree()
    up.proc.send_signal(signal.SIGTERM)
    assert up.proc.wait(90) == 0, up.output
    assert wait_gone(pids | in_groups(groups), timeout=10) == set()


def test_killed_supervisor_takes_its_children_along(up_factory):
    up = up_factory()
    up.wait_ready()
    pids, groups = up.tree()
    up.proc.send_signal(signal.SIGKILL)
    up.proc.wait(10)
    assert wait_gone(pids | in_groups(groups), timeout=10) == set()


def test_startup_failure_is_reported_and_cleaned_up(up_factory, tmp_path):
    """The file compiles where `up` runs (a relative directory that does not exist is
    fine), but not for the agent: re-rooted into the data directory, the path is
    absolute, and its directory is missing."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "agents:\n  web:\n"
        "    sources: {x: {type: tail, paths: [data/missing/a.log], channels: [c]}}\n"
        "    channels: {c: {type: memory}}\n"
        "    sinks: {k: {type: kafka, channel: c, topic: t}}\n"
    )
    up = up_factory(config=str(bad))
    assert up.proc.wait(60) == 1, up.output
    up.reader.join(5)
    assert "startup failed: web exited with code 1" in up.output
    assert "/data/missing/a.log': directory" in up.output
    assert descendants(up.proc.pid) == set()


def test_a_pipelines_file_with_errors_is_refused_before_starting_anything(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  web:\n    sources:\n      x: {type: no-such-source}\n")
    result = subprocess.run(
        [sys.executable, "-m", "logflume", "up", "--no-spark", "--config", str(bad)]
        + ["--data-dir", str(tmp_path / "data")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert f"{bad}:4:17: agents.web.sources.x.type: unknown source type 'no-such-source'" in (
        result.stderr
    )
    assert f"error(s) in {bad}" in result.stderr
    assert not (tmp_path / "data").exists()


def test_busy_broker_port_is_refused_before_starting_anything(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "logflume", "up", "--no-spark", "--broker-port", str(port)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 2
    assert f"port {port} is in use" in result.stderr


def test_derived_config_points_the_demo_at_its_own_ports_and_data_dir(tmp_path):
    agents, errors = compile_file(REPO / "pipelines.yaml")
    assert errors == []
    data = tmp_path / "d"
    config = DemoConfig(agents, data, "127.0.0.1:4567", udp_port=5678, metrics_port=6789)
    web = config.specs["web"]
    assert web.sources["nginx"].config.paths == [str(data / "demo" / "access.log")]
    assert all(s.config.bootstrap_servers == "127.0.0.1:4567" for s in web.sinks.values())
    assert config.udp_address() == ("127.0.0.1", 5678)
    assert config.metrics_address("web") == ("127.0.0.1", 6789)
    assert config.listeners("web") == [("udp", 5678)]
    routes = {s.cls.type_name: topics for s, topics in config.routes("web")}
    assert routes == {"tail": ["nginx-access"], "udp": ["netcat"]}
    assert agents["web"].sources["nginx"].config.paths == ["data/demo/access.log"]


def test_the_derived_file_compiles_to_the_derived_agents(tmp_path):
    agents, _ = compile_file(REPO / "pipelines.yaml")
    data = tmp_path / "d"
    (data / "demo").mkdir(parents=True)
    config = DemoConfig(agents, data, "127.0.0.1:4567", udp_port=5678, metrics_port=6789)
    path = data / "run" / "pipelines.yaml"
    config.write(path, REPO / "pipelines.yaml")
    assert compile_file(path) == (config.specs, [])
    assert path.stat().st_mode & 0o777 == 0o600
