"""`logflume --version` and `--log-format json`: the formatter itself, and real
long-running commands whose every output line is one JSON object."""

import logging
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import orjson

import logflume
from broker.cluster.launcher import broker_command
from common.logformat import JsonFormatter, json_line
from logflume.cli import build_parser
from logflume.commands.up import Demo
from testkit.procs import wait_until

LOGFLUME = Path(sys.executable).parent / "logflume"  # the console script, as installed
KEYS = {"timestamp", "level", "logger", "message", "pid"}
RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def record(msg, *args, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("broker.server", logging.WARNING, __file__, 1, msg, args, exc_info)


def parse(line) -> dict:
    """One output line as a log object with at least the common keys."""
    fields = orjson.loads(line)
    assert isinstance(fields, dict) and KEYS <= fields.keys(), line
    assert RFC3339_MS.match(fields["timestamp"]), line
    return fields


class Lines:
    """The lines a child writes on `pipe`, collected by a thread as they come."""

    def __init__(self, pipe):
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.reader.start()

    def _read(self, pipe) -> None:
        for line in pipe:
            self.lines.append(line.rstrip("\n"))

    def find(self, text: str) -> dict | None:
        """The first line whose message contains `text`, parsed."""
        for line in list(self.lines):
            if text in line:
                fields = parse(line)
                if text in fields["message"]:
                    return fields
        return None


def stop(proc: subprocess.Popen, timeout: float = 30) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise


def test_version():
    result = subprocess.run([LOGFLUME, "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"logflume {logflume.__version__}\n"
    assert logflume.__version__ == "0.1.0"


def test_json_record_keys_and_timestamp():
    r = record("%d connection(s) from %s", 3, "127.0.0.1")
    r.created = 1795716123.1239  # 2026-11-26T18:02:03.123Z
    fields = orjson.loads(JsonFormatter().format(r))
    assert fields == {
        "timestamp": "2026-11-26T18:02:03.123Z",
        "level": "WARNING",
        "logger": "broker.server",
        "message": "3 connection(s) from 127.0.0.1",
        "pid": r.process,
    }


def test_json_record_with_an_exception_stays_on_one_line():
    try:
        raise ValueError("bad\nbatch")
    except ValueError:
        r = record("produce to %s failed", "t-0", exc_info=sys.exc_info())
    text = JsonFormatter().format(r)
    assert "\n" not in text
    fields = parse(text)
    assert fields["message"] == "produce to t-0 failed"
    assert fields["exception"].startswith("Traceback (most recent call last):")
    assert fields["exception"].endswith("ValueError: bad\nbatch")


def test_json_record_never_fails_on_what_it_is_given():
    class Opaque:
        def __str__(self):
            return "opaque"

    assert parse(JsonFormatter().format(record("%s %r", Opaque(), b"\xff")))["message"] == (
        "opaque b'\\xff'"
    )
    assert parse(JsonFormatter().format(record(Opaque())))["message"] == "opaque"
    # a file name decoded with surrogateescape, which orjson refuses as is
    fields = parse(JsonFormatter().format(record("tailing %s", "/var/log/\udcffx.log")))
    assert fields["message"] == "tailing /var/log/\\udcffx.log"


def test_json_line_keeps_json_and_wraps_the_rest():
    child = b'{"timestamp":"2026-11-26T18:02:03.123Z","level":"ERROR","logger":"broker",'
    child += b'"message":"boom","pid":7}'
    assert orjson.loads(json_line(child, "broker-0", 7, child="broker-0")) == {
        **orjson.loads(child),
        "child": "broker-0",
    }
    for text in (b"2026-11-26 18:02:03,123 [myid:] - INFO  [main:ZooKeeperServer@1]", b"{x"):
        fields = parse(json_line(text, "zookeeper", 8, child="zookeeper"))
        assert fields["message"] == text.decode()
        assert (fields["level"], fields["logger"], fields["pid"]) == ("INFO", "zookeeper", 8)
        assert fields["child"] == "zookeeper"


def test_warnings_and_uncaught_exceptions_are_json_too():
    script = (
        "import warnings, threading\n"
        "from common.logformat import configure_logging\n"
        "configure_logging('INFO', 'json')\n"
        "warnings.warn('old setting')\n"
        "t = threading.Thread(target=lambda: 1 / 0, name='worker'); t.start(); t.join()\n"
        "raise RuntimeError('boom')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    lines = [parse(line) for line in result.stderr.splitlines()]
    assert [(f["level"], f["logger"]) for f in lines] == [
        ("WARNING", "py.warnings"),
        ("CRITICAL", "logflume"),
        ("CRITICAL", "logflume"),
    ]
    assert "UserWarning: old setting" in lines[0]["message"]
    assert lines[1]["message"] == "uncaught exception in thread worker"
    assert lines[1]["exception"].endswith("ZeroDivisionError: division by zero")
    assert lines[2]["exception"].endswith("RuntimeError: boom")


def test_children_get_the_logging_flags():
    args = build_parser().parse_args(
        ["--log-level", "debug", "--log-format", "json", "up", "--no-spark"]
    )
    flags = ["--log-level", "DEBUG", "--log-format", "json"]
    assert Demo(args).py == [sys.executable, "-m", "logflume", *flags]
    argv = broker_command(Path("/d"), "127.0.0.1:9092", "127.0.0.1:2181", 0, log_flags=flags)
    parsed = build_parser().parse_args(argv[3:])
    assert (parsed.command, parsed.log_level, parsed.log_format) == ("broker", "DEBUG", "json")


def test_broker_logs_json_lines_and_stops_on_sigterm(tmp_path):
    proc = subprocess.Popen(
        [LOGFLUME, "--log-format", "json", "broker", "--data-dir", str(tmp_path / "data")]
        + ["--listen", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = Lines(proc.stderr)
    try:
        listening = wait_until(
            lambda: out.find("listener PLAINTEXT (PLAINTEXT) on"),
            60,
            lambda: f"the broker to listen:\n{out.lines}",
        )
        assert listening["logger"].startswith("broker") and listening["level"] == "INFO"
        assert listening["pid"] == proc.pid
        assert stop(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    out.reader.join(10)
    assert out.lines and all(parse(line) for line in out.lines)
    assert out.find("broker stopped")


def test_cluster_up_passes_json_on_to_its_brokers(tmp_path):
    """The supervisor's console and each broker's log file are JSON lines; ZooKeeper
    keeps its own log4j format in its file."""
    data = tmp_path / "cluster"
    proc = subprocess.Popen(
        [LOGFLUME, "--log-format", "json", "cluster", "up", "--brokers", "1"]
        + ["--data-dir", str(data), "--base-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = Lines(proc.stdout)
    try:
        ready = wait_until(
            lambda: out.find("bootstrap servers"), 90, lambda: f"the cluster:\n{out.lines}"
        )
        assert ready["logger"] == "cluster" and ready["pid"] == proc.pid
        assert stop(proc, 60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    out.reader.join(10)
    assert all(parse(line) for line in out.lines)
    broker_log = (data / "broker-0.log").read_text().splitlines()
    assert broker_log and all(parse(line) for line in broker_log)
    assert any("broker stopped" in parse(line)["message"] for line in broker_log)
