"""The pipeline as a platform team deploys it (testkit/fleet.py, tests/fleet/scenario.py):
three web hosts, each with its own host name, a real nginx and the agent installed
from the wheel with the production template, shipping over SASL_SSL with per-host
ACLs into three brokers with ZooKeeper; a Spark standalone cluster (a master, two
workers) running the realtime job throughout and the offline job at the end. During
30 to 90 s of traffic one agent and one broker are SIGKILLed and restarted.

The independent count is what nginx itself wrote on each host: every access-log line
is in the topic exactly once (read_committed) with its host, the error logs and a
netcat line too; the offline hourly rows and the realtime final minutes equal
nginx's per host (requests, status classes, bytes); `logflume audit --recount`
finds every minute of every host complete, its agent counts equal to nginx's. Last,
two agents drill (`audit_drill`: a line lost, a line lost and one sent twice) and
the audit names each: host, minute and what differs.

The module runs the fleet once (fixture `run`, three to four minutes on this 2-core
machine, most of it traffic and Spark). Its per-test timeout is raised to 900 s
because the fixture's set-up counts towards the first test's time."""

import signal
import time

import pytest

from testkit.netns import NetnsUnavailable, check_support
from tests.fleet import scenario

pytestmark = pytest.mark.timeout(900)

HOSTS = 3
RATE = 100  # requests/s per host while busy
BUSY_AT_LEAST_S = 30  # then up to the next minute boundary: 30-90 s of traffic


def _faults(fleet, t0: float) -> None:
    """web-1's agent SIGKILLed 10 s in and restarted; broker 1 SIGKILLed 20 s in,
    restarted 5 s later."""
    time.sleep(max(0.0, t0 + 10 - time.time()))
    fleet.kill_agent(fleet.hosts[0])
    fleet.start_agent(fleet.hosts[0])
    time.sleep(max(0.0, t0 + 20 - time.time()))
    fleet.cluster.procs[1].send_signal(signal.SIGKILL)
    fleet.cluster.procs[1].wait(10)
    time.sleep(5)
    with fleet.lab.inside("client"):
        fleet.cluster.start_broker(1)


@pytest.fixture(scope="module")
def run(tmp_path_factory, wheel):
    try:
        check_support()
    except NetnsUnavailable as exc:
        pytest.fail(str(exc))
    root = tmp_path_factory.mktemp("fleet")
    with scenario.fleet_run(root, wheel, HOSTS, RATE, BUSY_AT_LEAST_S, _faults) as result:
        yield result


def test_every_access_line_is_in_the_topic_once_with_its_host(run):
    scenario.check_access_lines_once(run, at_least=HOSTS * RATE * BUSY_AT_LEAST_S // 2)


def test_error_logs_and_the_netcat_line_arrive_with_their_host(run):
    scenario.check_error_lines_and_netcat(run)


def test_the_offline_hourly_rows_equal_nginx_per_host(run):
    scenario.check_offline_hourly(run)


def test_the_realtime_final_minutes_equal_nginx_per_host(run):
    scenario.check_realtime_finals(run)


def test_the_audit_finds_every_minute_of_every_host_complete(run):
    scenario.check_audit(run)


def test_a_web_hosts_user_may_do_what_its_agent_needs_and_nothing_else(run):
    host = run.fleet.hosts[1]
    assert host.check(["hostname"]).stdout.strip() == host.name
    assert run.fleet.try_as(host) == {
        "write nginx-access.dlq": "ok",
        "write another host's transactional id": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "read nginx-access": "TOPIC_AUTHORIZATION_FAILED",
        "see a topic of its own choosing": "TOPIC_AUTHORIZATION_FAILED",
        "reach the PLAINTEXT listener": "refused",
    }


def test_an_audit_drill_is_named_by_host_minute_and_kind(run):
    """Last in the module: it adds lines to two hosts' access logs."""
    scenario.check_audit_drill(run)
