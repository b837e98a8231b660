"""One run of the fleet lab (testkit/fleet.py) and the checks against nginx's count.

`fleet_run(...)` brings the lab up (cluster, web hosts, Spark standalone with the
realtime job running from the start), drives busy traffic on every host while
`faults(fleet, t0)` runs in the calling thread, lets the realtime job close the
last busy minute, stops the traffic, waits until every line is shipped, then runs
the offline job, as scheduled, to completion beside the realtime job, and stops
the realtime job. The `check_*` functions compare what
came out with what nginx wrote on each host; each raises AssertionError.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import re
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pyarrow.parquet as pq

from testkit.fleet import Fleet
from testkit.procs import wait_until

TAIL_RATE = 2  # requests/s per host after the busy phase: event time keeps moving
WATERMARK_S = 30  # the realtime job's lateness: covers an agent restart and a failover
FIGURES = ("requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes")
REALTIME_CORES = "spark.cores.max=1"  # the other worker's core is the offline job's
LINE = re.compile(r'^\S+ \S+ \S+ \[([^\]]+)\] "([^"]*)" (\d{3}) (\d+|-) ')


@dataclasses.dataclass
class FleetRun:
    fleet: Fleet
    root: Path
    busy_until: float = 0.0

    @property
    def realtime_out(self) -> Path:
        return self.root / "realtime"

    @property
    def offline_out(self) -> Path:
        return self.root / "offline"


@contextlib.contextmanager
def fleet_run(
    root: Path,
    wheel: Path,
    hosts: int,
    rate: float,
    busy_at_least_s: float,
    faults: Callable[[Fleet, float], None],
):
    """Yield a FleetRun once everything above is done; tear it all down after."""
    fleet = Fleet(root, hosts, wheel, Path(sys.prefix) / "wheelhouse")
    try:
        fleet.start()
        run = FleetRun(fleet, root)
        realtime = fleet.etl(
            "realtime", run.realtime_out, "--starting-offsets", "earliest",
            "--watermark", f"{WATERMARK_S} seconds", "--trigger-seconds", "1",
            "--no-provisional", "--conf", REALTIME_CORES,
        )  # fmt: skip
        _traffic(run, rate, busy_at_least_s, faults)
        _wait_for_finals(run, realtime)
        fleet.stop_traffic()
        _wait_shipped(fleet)
        offline = fleet.etl("offline", run.offline_out)
        assert offline.wait(600) == 0, _tail(root / "offline.log")
        realtime.send_signal(signal.SIGTERM)
        assert realtime.wait(60) == 0, _tail(root / "realtime.log")
        yield run
    finally:
        fleet.close()


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-4000:] if path.exists() else f"(no {path})"


def _traffic(run: FleetRun, rate: float, at_least_s: float, faults) -> None:
    """Busy traffic until a second before the first minute boundary `at_least_s`
    away, so that the realtime job can close the last busy minute soon after; the
    README's netcat line from every host; `faults` meanwhile."""
    t0 = time.time()
    run.busy_until = (int(t0 + at_least_s) // 60 + 1) * 60 - 1
    for host in run.fleet.hosts:
        run.fleet.start_traffic(host, rate, run.busy_until - t0, TAIL_RATE)
    for host in run.fleet.hosts:
        run.fleet.udp_line(host, f"hello from {host.name}")
    faults(run.fleet, t0)
    time.sleep(max(0.0, run.busy_until - time.time()))


def _wait_for_finals(run: FleetRun, realtime) -> None:
    last_busy_minute = int(run.busy_until) // 60 * 60

    def closed() -> bool:
        assert realtime.poll() is None, _tail(run.root / "realtime.log")
        return last_busy_minute in {m for m, _ in final_minutes(run.realtime_out)}

    wait_until(
        closed,
        timeout=WATERMARK_S + 240,
        what="the realtime job's final rows of the last busy minute",
        every=1,
    )


def _wait_shipped(fleet: Fleet) -> None:
    """Until every access-log line of every host is a committed record."""
    want = sum(len(h.access_lines()) for h in fleet.hosts)
    wait_until(
        lambda: len(fleet.records("nginx-access")) >= want,
        timeout=180,
        what=lambda: f"{want} access-log lines shipped",
        every=2,
    )


# -- what came out, what nginx wrote --------------------------------------------------


def nginx_figures(lines: list[str], bucket_s: int) -> dict:
    """{bucket start (epoch s): figures} counted from nginx's own log lines."""
    out: dict = collections.defaultdict(collections.Counter)
    for line in lines:
        m = LINE.match(line)
        assert m, f"not a combined-format line: {line!r}"
        when = int(datetime.strptime(m.group(1), "%d/%b/%Y:%H:%M:%S %z").timestamp())
        figures = out[when // bucket_s * bucket_s]
        status = int(m.group(3))
        figures["requests"] += 1
        figures[f"status_{status // 100}xx"] += 1
        figures["bytes"] += 0 if m.group(4) == "-" else int(m.group(4))
    return {k: {f: v.get(f, 0) for f in FIGURES} for k, v in out.items()}


def final_minutes(out: Path) -> dict:
    """{(minute start, host): figures} of the realtime job's final Parquet rows."""
    rows = {}
    for path in sorted((out / "minute").glob("date=*/part-*.parquet")):
        for r in pq.read_table(path).to_pylist():
            rows[(int(r["window_start"].timestamp()), r["host"])] = {f: r[f] for f in FIGURES}
    return rows


def host_of(msg) -> str:
    return dict(msg.headers() or []).get("host", b"").decode()


def check_access_lines_once(run: FleetRun, at_least: int) -> None:
    got = collections.Counter()
    for msg in run.fleet.records("nginx-access"):
        value = orjson.loads(msg.value())
        got[(host_of(msg), value["path"], value["status"], value["bytes"])] += 1
    want = collections.Counter()
    for host in run.fleet.hosts:
        for line in host.access_lines():
            m = LINE.match(line)
            want[(host.name, m.group(2).split(" ")[1], int(m.group(3)), int(m.group(4)))] += 1
    assert sum(want.values()) >= at_least
    assert max(want.values()) == 1, "the load generator makes every request distinct"
    assert got == want


def check_error_lines_and_netcat(run: FleetRun) -> None:
    got = collections.Counter(
        (host_of(m), m.value().decode()) for m in run.fleet.records("nginx-error")
    )
    want = collections.Counter((h.name, line) for h in run.fleet.hosts for line in h.error_lines())
    assert sum(want.values()) > 0
    assert got == want
    netcat = sorted((host_of(m), m.value().decode()) for m in run.fleet.records("netcat"))
    assert netcat == [(h.name, f"hello from {h.name}") for h in run.fleet.hosts]


def check_offline_hourly(run: FleetRun) -> None:
    rows = {}
    for path in (run.offline_out / "hourly").rglob("*.parquet"):
        for r in pq.read_table(path).to_pylist():
            rows[(int(r["hour_start"].timestamp()), r["host"])] = {f: r[f] for f in FIGURES}
    want = {
        (hour, host.name): figures
        for host in run.fleet.hosts
        for hour, figures in nginx_figures(host.access_lines(), 3600).items()
    }
    assert rows == want


def check_realtime_finals(run: FleetRun, late_expected: bool = False) -> None:
    """The realtime job's final rows equal nginx's own figures per (minute, host).

    With `late_expected` (an outage longer than the job's lateness), lines that came
    after their minute closed are dropped by design: then every figure is at most
    nginx's, and the requests missing add up to the late rows the job reported."""
    got = final_minutes(run.realtime_out)
    last = max(m for m, _ in got)
    assert last >= int(run.busy_until) // 60 * 60
    want = {
        (minute, host.name): figures
        for host in run.fleet.hosts
        for minute, figures in nginx_figures(host.access_lines(), 60).items()
        if minute <= last
    }
    differ = {
        k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)
    }
    if not late_expected:
        assert differ == {}, (
            f"(minute, host): (realtime final, nginx) {sorted(differ.items())[:10]}"
        )
        return
    assert set(got) <= set(want), sorted(set(got) - set(want))[:10]
    for key, (final, figures) in differ.items():
        final = final or dict.fromkeys(FIGURES, 0)
        assert all(final[f] <= figures[f] for f in FIGURES), (key, final, figures)
    missing = sum(want[k]["requests"] - (got.get(k) or {"requests": 0})["requests"] for k in want)
    assert missing == late_reported(run), (missing, late_reported(run), sorted(differ)[:10])


def late_reported(run: FleetRun) -> int:
    """Rows the realtime job dropped as late, summed over its progress lines."""
    text = (run.root / "realtime.log").read_text(errors="replace")
    return sum(int(n.replace(",", "")) for n in re.findall(r"unparsable, ([\d,]+) late\)", text))


def check_audit(run: FleetRun) -> None:
    """`logflume audit --recount` over the busy minutes: every (host, minute) of the
    access log complete at every tier (the topic recounted, the offline and realtime
    jobs where they covered it), and the agents' counts equal nginx's own, minute by
    minute. Everything was shipped before the check: 30 s of grace suffice."""
    first = min(int(datetime.strptime(LINE.match(h.access_lines()[0]).group(1),
                                      "%d/%b/%Y:%H:%M:%S %z").timestamp())
                for h in run.fleet.hosts) // 60 * 60  # fmt: skip
    end = (int(run.busy_until) // 60 + 1) * 60
    code, report = run.fleet.audit(
        "--topic", "nginx-access", "--recount", "--grace", "30",
        "--from", str(first * 1000), "--to", str(end * 1000),
    )  # fmt: skip
    buckets = report["buckets"]
    assert code == 0 and {b["status"] for b in buckets} == {"complete"}, [
        b for b in buckets if b["status"] != "complete"
    ][:5]
    assert set(report["compared"]) == {"broker", "spark-offline", "spark-realtime"}
    got = {(b["minute_ms"] // 1000, b["host"]): b["tiers"]["agent"]["count"] for b in buckets}
    want = {
        (minute, host.name): figures["requests"]
        for host in run.fleet.hosts
        for minute, figures in nginx_figures(host.access_lines(), 60).items()
        if first <= minute < end
    }
    assert got == want
    realtime = [b for b in buckets if "spark-realtime" in b["tiers"]]
    assert len(realtime) >= len(buckets) // 2, "the realtime job held to most minutes"
    check_source_tier(run, first)


def check_source_tier(run: FleetRun, first: int) -> None:
    """The agents' source tier (`agent-source`, by the minute of reading) summed over
    the whole run equals the access-log lines of each host whose agent was never
    killed: every line read once, none filtered and none unparsable (nginx wrote them
    all in its combined format). Everything was shipped and the traffic stopped.
    A killed agent loses the source counts it had not published yet (README, "The
    audit"): its host is not held to this."""
    _, report = run.fleet.audit(
        "--topic", "nginx-access", "--from", str(first * 1000),
        "--to", str((int(time.time()) // 60 + 1) * 60 * 1000),
    )  # fmt: skip
    read: collections.Counter[str] = collections.Counter()
    for b in report["buckets"]:
        source = b["tiers"].get("agent-source")
        if source is not None:
            assert source["filtered"] == source["unparsable"] == 0, b
            read[b["host"]] += source["count"]
    held = [host for host in run.fleet.hosts if host.agent_kills == 0]
    assert held, "every agent was killed: nothing to hold the source tier to"
    lines = {host.name: len(host.access_lines()) for host in held}
    assert {name: read[name] for name in lines} == lines


def check_audit_drill(run: FleetRun) -> None:
    """Two hosts' agents drill (`audit_drill` on their access-log sink, set in their
    pipelines.yaml): web-2's loses one line, web-3's loses one and sends another
    twice. The lines they ship then carry a time 30 minutes back (appended to the
    access log with that time), a minute past its grace and before any minute the
    Spark jobs read, so only the broker is held to the agents' counts: the audit
    names web-2's minute as missing 1 at the broker, and web-3's, whose counts
    agree, as a checksum that differs. Adds lines to the hosts' access logs: after
    every check of nginx's count."""
    fleet = run.fleet
    web2, web3 = fleet.hosts[1], fleet.hosts[2]
    minute = (int(time.time()) // 60 - 30) * 60
    stamp = datetime.fromtimestamp(minute, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")
    lines = 20
    for host, drill in ((web2, "{drop: 1}"), (web3, "{drop: 1, duplicate: 1}")):
        fleet.set_audit_drill(host, "access-kafka", drill)
        with open(host.log_dir / "access.log", "a") as log:
            for i in range(lines):
                log.write(f'10.0.0.1 - - [{stamp}] "GET /drill/{i} HTTP/1.1" 200 5 "-" "drill"\n')

    def shipped() -> bool:
        drilled = [m for m in fleet.records("nginx-access") if b"/drill/" in m.value()]
        return len(drilled) == (lines - 1) + lines

    wait_until(shipped, timeout=120, what="the drilled lines shipped", every=2)
    code, report = fleet.audit(
        "--topic", "nginx-access", "--recount", "--grace", "30",
        "--from", str(minute * 1000), "--to", str((minute + 60) * 1000),
    )  # fmt: skip
    verdicts = {b["host"]: b for b in report["buckets"]}
    assert code == 3 and set(verdicts) == {web2.name, web3.name}, report
    lost, swapped = verdicts[web2.name], verdicts[web3.name]
    assert lost["minute_ms"] == swapped["minute_ms"] == minute * 1000
    assert (lost["status"], lost["difference"], lost["where"]) == ("missing", -1, "broker")
    assert (swapped["status"], swapped["where"]) == ("checksum differs", "broker")
    assert lost["tiers"]["agent"]["count"] == swapped["tiers"]["agent"]["count"] == lines
    assert swapped["tiers"]["broker"]["count"] == lines
