"""`logflume cluster restart --rolling`: restart every broker of a cluster, one at a
time, as Kafka operators roll a cluster, so that producers with acks=all and
consumers never lose the partitions' availability.

The plan: every broker in turn, by id, the controller last (restarting it moves the
controller, which should happen once, not before every other broker). For each:

1. wait until no partition is under-replicated (every partition has a leader and its
   ISR holds all its replicas): restarting a broker while another replica is out of
   the ISR could leave a partition below `min.insync.replicas`, or without a leader;
2. restart it: SIGTERM makes the broker shut down in a controlled way (its leaderships
   move to other in-sync replicas before it stops serving, broker/cluster/node.py),
   then it is started again;
3. wait until it serves again: it answers Metadata and lists every broker;
4. wait until it is back in every ISR (no partition under-replicated);
5. give the partitions back to their preferred leaders: ElectLeaders PREFERRED on
   the controller for every partition (as `kafka-leader-election --election-type
   PREFERRED --all-topic-partitions` does; the controller's auto leader rebalance
   would do it too, but only on its timer), and wait until each partition is led by
   the first replica of its assignment.

Each wait polls the cluster's Metadata (broker/protocol/client.py), as every broker
reports it (each follows ZooKeeper on its own schedule, so one could still report a
state that has passed), and gives up after `--timeout` seconds: the
command stops there with status 1 and says what was not done, leaving the cluster as
it is (the brokers already restarted stay restarted).

How a broker is restarted (a `Restarter`):
- a cluster of `logflume cluster up --data-dir D`: the restart is asked of that
  supervisor through the file `D/broker-N.restart` (`ChildSpec.restart_file`); it
  removes the file, SIGTERMs the broker and starts it again once it has exited,
  without backoff and without reporting a crash. The restart is done once the pid
  file names a new process;
- brokers run by systemd: `systemctl restart <unit>`, the unit named by the
  `--systemd-unit` template with the broker id as `{id}`, on the host named by the
  `--systemd-host` template (systemctl's `--host`, over ssh) or on this one;
  systemd's stop sends SIGTERM and waits for the exit (TimeoutStopSec), then starts
  the unit again.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from broker.cluster.launcher import bootstrap_file, pid_file, read_pid, restart_file
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient, Security
from common.fsutil import atomic_write
from common.hostport import parse_hostport
from common.processes import running

METADATA_VERSION = 8
ELECT_LEADERS_VERSION = 2
PREFERRED = 0  # ElectLeaders election_type
POLL_S = 0.2
ELECT_EVERY_S = 2.0


class RollError(Exception):
    """The roll cannot go on: a step did not complete in time, or a broker could not
    be restarted. The message says which broker and what was not done."""


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    index: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    def __str__(self) -> str:
        return (
            f"{self.topic}-{self.index} (leader {self.leader}, replicas "
            f"{list(self.replicas)}, isr {list(self.isr)})"
        )


@dataclass(frozen=True)
class ClusterView:
    """What one broker's Metadata says of the cluster."""

    brokers: dict[int, tuple[str, int]]
    controller: int
    partitions: tuple[PartitionInfo, ...]

    def under_replicated(self) -> list[PartitionInfo]:
        """Partitions without a leader or with a replica out of the ISR."""
        return [p for p in self.partitions if p.leader < 0 or set(p.isr) != set(p.replicas)]

    def not_on_preferred(self) -> list[PartitionInfo]:
        """Partitions whose leader is not the first replica of their assignment."""
        return [p for p in self.partitions if p.replicas and p.leader != p.replicas[0]]

    def order(self) -> list[int]:
        """The brokers in restart order: by id, the controller last."""
        return sorted(self.brokers, key=lambda b: (b == self.controller, b))


def parse_view(metadata: dict) -> ClusterView:
    partitions = tuple(
        PartitionInfo(
            t["name"],
            p["partition_index"],
            p["leader_id"],
            tuple(p["replica_nodes"]),
            tuple(p["isr_nodes"]),
        )
        for t in metadata["topics"]
        if t["error_code"] == ErrorCode.NONE
        for p in t["partitions"]
    )
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in metadata["brokers"]}
    return ClusterView(brokers, metadata["controller_id"], partitions)


class MetadataSource:
    """Asks the cluster over the Kafka protocol: the first broker that answers (those
    it learnt of first, then the bootstrap servers), or every broker it knows."""

    def __init__(self, bootstrap: str, security: Security, timeout_s: float = 5.0):
        self.bootstrap = [
            parse_hostport(a.strip(), "--bootstrap-server") for a in bootstrap.split(",")
        ]
        self.security = security
        self.timeout_s = timeout_s
        self.known: dict[int, tuple[str, int]] = {}

    def _request(self, address: tuple[str, int], api: int, version: int, body: dict) -> dict:
        host, port = address
        with BlockingClient(
            host, port, self.timeout_s, "logflume-cluster-restart", self.security
        ) as c:
            return c.request(api, version, body)

    def metadata_from(self, address: tuple[str, int]) -> ClusterView:
        body = {"topics": None, "allow_auto_topic_creation": False}
        view = parse_view(self._request(address, ApiKey.METADATA, METADATA_VERSION, body))
        self.known.update(view.brokers)
        return view

    def view(self) -> ClusterView:
        """The cluster as the first broker that answers sees it; OSError when none does."""
        addresses = [a for _, a in sorted(self.known.items())]
        addresses += [a for a in self.bootstrap if a not in addresses]
        errors = []
        for address in addresses:
            try:
                return self.metadata_from(address)
            except (OSError, ConnectionError) as e:
                errors.append(f"{address[0]}:{address[1]}: {e}")
        raise OSError("no broker answered (" + "; ".join(errors) + ")")

    def every_view(self) -> dict[int, ClusterView]:
        """The cluster as each known broker sees it; OSError if one does not answer.
        Each broker's metadata follows ZooKeeper on its own schedule: a state that all
        of them report is not one that a lagging broker still reports."""
        views, silent = self.answering_views()
        if silent:
            raise OSError("; ".join(silent))
        return views

    def answering_views(self) -> tuple[dict[int, ClusterView], list[str]]:
        """The cluster as each known broker that answers sees it, and why the others
        did not (a paused broker times out until its ZooKeeper session ends and the
        others stop listing it)."""
        if not self.known:
            self.view()
        views: dict[int, ClusterView] = {}
        silent: list[str] = []
        for broker, (host, port) in sorted(self.known.items()):
            try:
                views[broker] = self.metadata_from((host, port))
            except (OSError, ConnectionError) as e:
                silent.append(f"broker {broker} ({host}:{port}) does not answer: {e}")
        return views, silent

    def elect_preferred(self, controller: int) -> None:
        """ElectLeaders PREFERRED for every partition, sent to the controller; RollError
        when the cluster refuses it (it needs ALTER on the cluster). Per-partition
        errors are left to the caller's next look at the leaders."""
        body = {"election_type": PREFERRED, "topic_partitions": None, "timeout_ms": 30000}
        address = self.known[controller]
        answer = self._request(address, ApiKey.ELECT_LEADERS, ELECT_LEADERS_VERSION, body)
        if answer["error_code"] != ErrorCode.NONE:
            name = ErrorCode(answer["error_code"]).name
            raise RollError(f"the preferred leader election was refused: {name}")


class Restarter(Protocol):
    def check(self) -> None:
        """Raise RollError if brokers cannot be restarted this way at all."""

    def describe(self, broker_id: int) -> str:
        """How broker `broker_id` will be restarted, for the plan."""

    def restart(self, broker_id: int, deadline: float) -> str:
        """Restart the broker (by `deadline`, time.monotonic()); returns what was done.
        Raises RollError."""


class SupervisorRestarter:
    """Brokers of a `logflume cluster up --data-dir D`, restarted by its supervisor."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)

    def check(self) -> None:
        pid = read_pid(pid_file(self.data_dir, "cluster"))
        if pid is None or not running(pid):
            raise RollError(f"no `logflume cluster up` is running for {self.data_dir}")

    def describe(self, broker_id: int) -> str:
        return f"ask `logflume cluster up` through {restart_file(self.data_dir, f'broker-{broker_id}')}"

    def restart(self, broker_id: int, deadline: float) -> str:
        self.check()
        name = f"broker-{broker_id}"
        pids = pid_file(self.data_dir, name)
        old = read_pid(pids)
        if old is None:
            raise RollError(f"{name} is not running (no {pids})")
        request = restart_file(self.data_dir, name)
        atomic_write(request, "")
        while time.monotonic() < deadline:
            new = read_pid(pids)
            if not request.exists() and new not in (None, old):
                return f"pid {old} -> {new}"
            time.sleep(POLL_S)
        request.unlink(missing_ok=True)
        raise RollError(f"{name} was not restarted (its pid file still says {read_pid(pids)})")


class SystemdRestarter:
    """Brokers run by systemd units named by `template` (`{id}` the broker id), on
    this machine, or with `host_template` on the host it names, through systemctl's
    own `--host` (ssh to `[user@]host`)."""

    def __init__(self, template: str, host_template: str | None = None):
        self.template = template
        self.host_template = host_template

    def command(self, broker_id: int) -> list[str]:
        cmd = ["systemctl"]
        if self.host_template:
            cmd += ["--host", self.host_template.replace("{id}", str(broker_id))]
        return [*cmd, "restart", self.template.replace("{id}", str(broker_id))]

    def check(self) -> None:
        pass

    def describe(self, broker_id: int) -> str:
        return " ".join(self.command(broker_id))

    def restart(self, broker_id: int, deadline: float) -> str:
        cmd = self.command(broker_id)
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=max(1.0, deadline - time.monotonic()),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RollError(f"{' '.join(cmd)} did not return in time") from None
        except OSError as e:
            raise RollError(f"{' '.join(cmd)}: {e}") from None
        if done.returncode != 0:
            raise RollError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
        return " ".join(cmd)


class Roll:
    """One rolling restart: the plan, then each broker's steps, printed as they go."""

    def __init__(
        self,
        source: MetadataSource,
        restarter: Restarter,
        timeout_s: float,
        out: TextIO,
    ):
        self.source = source
        self.restarter = restarter
        self.timeout_s = timeout_s
        self.out = out
        self.started = time.monotonic()

    def say(self, message: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[{elapsed:7.1f}s] {message}", file=self.out, flush=True)

    def plan(self) -> list[int]:
        """Print the plan; returns the brokers in restart order."""
        self.restarter.check()
        try:
            view = self.source.view()
        except OSError as e:
            raise RollError(f"cannot read the cluster's metadata: {e}") from None
        order = view.order()
        self.say(
            f"rolling restart of {len(order)} broker(s), controller {view.controller} last, "
            f"{len(view.partitions)} partition(s); each step may take up to "
            f"{self.timeout_s:g} s"
        )
        for i, broker in enumerate(order, 1):
            host, port = view.brokers[broker]
            self.say(
                f"  {i}. broker {broker} ({host}:{port}): wait for no under-replicated "
                f"partition; {self.restarter.describe(broker)}; wait until it serves and is "
                "back in every ISR; elect the preferred leaders"
            )
        return order

    def run(self, dry_run: bool = False) -> None:
        order = self.plan()
        if dry_run:
            self.say("dry run: nothing restarted")
            return
        expected = len(order)
        for broker in order:
            self._step(broker, "no under-replicated partition", self._fully_replicated())
            began = time.monotonic()
            self.say(f"broker {broker}: restarting ({self.restarter.describe(broker)})")
            done = self.restarter.restart(broker, began + self.timeout_s)
            self.say(f"broker {broker}: restarted ({done}) in {time.monotonic() - began:.1f} s")
            self._step(broker, "serving again", self._serves(broker, expected))
            self._step(broker, "back in every ISR", self._fully_replicated())
            self._step(broker, "preferred leaders back", self._preferred(broker))
        self.say(f"rolling restart done: {len(order)} broker(s)")

    def _step(self, broker: int, what: str, check: Callable[[], str | None]) -> None:
        """Poll `check` (None: done, else what is still missing) until done or timeout."""
        began = time.monotonic()
        deadline = began + self.timeout_s
        while True:
            try:
                missing = check()
            except (OSError, ConnectionError) as e:
                missing = str(e)
            if missing is None:
                self.say(f"broker {broker}: {what} after {time.monotonic() - began:.1f} s")
                return
            if time.monotonic() >= deadline:
                raise RollError(
                    f"broker {broker}: {what}: not done after {self.timeout_s:g} s: {missing}"
                )
            time.sleep(POLL_S)

    def _fully_replicated(self) -> Callable[[], str | None]:
        def check() -> str | None:
            views, silent = self.source.answering_views()
            for seen_by, view in views.items():
                lagging = view.under_replicated()
                if lagging:
                    more = f" and {len(lagging) - 3} more" if len(lagging) > 3 else ""
                    listed = ", ".join(map(str, lagging[:3])) + more
                    return f"under-replicated: {listed} (as broker {seen_by} says)"
            return "; ".join(silent) or None

        return check

    def _serves(self, broker: int, expected: int) -> Callable[[], str | None]:
        def check() -> str | None:
            views = self.source.every_view()
            short = [
                b for b, v in views.items() if broker not in v.brokers or len(v.brokers) < expected
            ]
            if short:
                return f"broker(s) {short} do not list all {expected} brokers yet"
            return None

        return check

    def _preferred(self, broker: int) -> Callable[[], str | None]:
        asked = [0.0]

        def check() -> str | None:
            views = self.source.every_view()
            view = views[broker]
            off = next((v.not_on_preferred() for v in views.values() if v.not_on_preferred()), [])
            if not off:
                return None
            if time.monotonic() - asked[0] >= ELECT_EVERY_S and view.controller >= 0:
                asked[0] = time.monotonic()
                self.source.elect_preferred(view.controller)
            more = f" and {len(off) - 3} more" if len(off) > 3 else ""
            return "not on their preferred leader: " + ", ".join(map(str, off[:3])) + more

        return check


def data_dir_bootstrap(data_dir: Path) -> str:
    """The bootstrap servers `logflume cluster up --data-dir` wrote; RollError if none."""
    try:
        text = bootstrap_file(data_dir).read_text().strip()
    except FileNotFoundError:
        text = ""
    if not text:
        raise RollError(f"no `logflume cluster up` has written {bootstrap_file(data_dir)}")
    return text
