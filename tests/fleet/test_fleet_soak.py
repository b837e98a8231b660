"""`make soak`: the fleet lab (tests/fleet/scenario.py) with eight web hosts for ten
minutes of traffic and faults throughout: an agent SIGKILLed and restarted every
75 s (each host in turn), a broker SIGKILLed and restarted, one web host cut off
from every broker for 60 s, the access logs rotated twice by rename (Debian's nginx
rotation: create, then SIGUSR1) and the error logs once by copytruncate. The same
exactness as the short run of `make test`.

copytruncate has a window of its own: lines nginx appends between logrotate's copy
and its truncation are in neither file, though the agent may have read them in
time. So the error logs are checked as "every line in the files arrived once, and
any other arrived line is an nginx error line of that host"; the access logs, rotated
by rename, exactly."""

import collections
import time

import pytest

from testkit.netns import NetnsUnavailable, check_support
from tests.fleet import scenario

pytestmark = [pytest.mark.soak, pytest.mark.timeout(3600)]

HOSTS = 8
RATE = 100  # requests/s per host while busy: 800 lines/s in all
BUSY_S = 600


def _at(t0: float, second: float) -> None:
    time.sleep(max(0.0, t0 + second - time.time()))


def _faults(fleet, t0: float) -> None:
    brokers = [f"b{i}" for i in range(fleet.cluster.count)]
    schedule = [(75 * k, "kill agent", fleet.hosts[(k - 1) % HOSTS]) for k in range(1, 8)]
    schedule += [(150, "kill broker", 2), (170, "start broker", 2)]
    schedule += [(240, "cut", fleet.hosts[2]), (300, "heal", fleet.hosts[2])]
    schedule += [(200, "rotate access", None), (420, "rotate access", None)]
    schedule += [(330, "copytruncate error", None)]
    for second, what, target in sorted(schedule, key=lambda s: s[0]):
        _at(t0, second)
        if what == "kill agent":
            fleet.kill_agent(target)
            fleet.start_agent(target)
        elif what == "kill broker":
            fleet.cluster.procs[target].kill()
            fleet.cluster.procs[target].wait(10)
        elif what == "start broker":
            with fleet.lab.inside("client"):
                fleet.cluster.start_broker(target)
        elif what == "cut":
            fleet.lab.isolate(target.name, brokers)
        elif what == "heal":
            for b in brokers:
                fleet.lab.heal(target.name, b)
        elif what == "rotate access":
            for host in fleet.hosts:
                fleet.logrotate(host, "access.log", "rename")
        else:
            for host in fleet.hosts:
                fleet.logrotate(host, "error.log", "copytruncate")


def test_eight_hosts_ten_minutes_with_faults(tmp_path, wheel):
    try:
        check_support()
    except NetnsUnavailable as exc:
        pytest.fail(str(exc))
    with scenario.fleet_run(tmp_path / "fleet", wheel, HOSTS, RATE, BUSY_S, _faults) as run:
        scenario.check_access_lines_once(run, at_least=HOSTS * RATE * BUSY_S // 2)
        scenario.check_offline_hourly(run)
        # the 60 s cut is longer than the realtime job's lateness: that host's lines
        # of those minutes come late, are dropped and counted as such
        scenario.check_realtime_finals(run, late_expected=True)
        got = collections.Counter(
            (scenario.host_of(m), m.value().decode()) for m in run.fleet.records("nginx-error")
        )
        want = collections.Counter((h.name, e) for h in run.fleet.hosts for e in h.error_lines())
        assert max(got.values()) == 1 and not want - got
        assert all(" [error] " in line for _, line in got - want)
