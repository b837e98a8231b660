"""Rebalance cost: one member joins a 100-member group consuming 1,000 partitions,
consumer group protocol (KIP-848) vs classic eager vs classic cooperative-sticky.

    .venv/bin/python -m bench.bench_rebalance             # 100 members, 1,000 partitions, 3 joins
    .venv/bin/python -m bench.bench_rebalance --quick     # 10 members, 100 partitions, 1 join
    .venv/bin/python -m bench.bench_rebalance --members 50 --partitions 500 --modes consumer

One `logflume broker` subprocess on loopback, one topic of `--partitions` partitions
(empty: what is measured is who owns what, not the records), and for each group
protocol in turn a fresh group of `--members` confluent-kafka consumers, one per
thread, spread over `--processes` processes (bench/rebalance_members.py):

- eager: classic protocol, `partition.assignment.strategy=range`;
- cooperative: classic protocol, `partition.assignment.strategy=cooperative-sticky`;
- consumer: `group.protocol=consumer`, the broker's `uniform` assignor.

The heartbeat interval is the same for all (`--heartbeat-ms`, 1 s): the classic
members' `heartbeat.interval.ms`, and the broker's
`group.consumer.heartbeat.interval.ms` (`--set`), which it gives the consumer-protocol
members. Once the group has settled (every partition owned by exactly one member,
every member owning some, no change of ownership for 3 heartbeats), one more member
subscribes; every assign, revoke and lost callback of every member is timestamped
and, once the group has settled again, replayed from the ownership before the join:

- unaffected partitions paused: partitions whose owner kept them through the
  rebalance, yet had them revoked in between (eager revokes every partition, so all
  but the moved ones count); the goal is none;
- partitions paused: every partition revoked from its owner, moved ones included;
- moved: partitions whose owner changed (the joining member's share: the cost any
  protocol pays);
- time to a stable assignment: from the joining member's subscribe() call to the last
  callback that changed who owns what, also in heartbeat intervals (goal: 2); the
  group's state is then checked with DescribeGroups (classic) or
  ConsumerGroupDescribe (consumer protocol; every member's assignment must equal its
  target, no revocation pending): Stable, with every member.

The members' heartbeats are in step after a rebalance (each one's interval restarts
when its assignment arrives), so when in the interval a member joins matters (a
classic member learns of a rebalance from its next heartbeat): the joins are sent at
evenly spread phases of the interval after the last change of ownership, (i + 0.5) /
`--repeats` (half an interval for one join). The joining member then close()s and
the group settles back before the next join (`--repeats` joins per protocol; medians
quoted). The figures use the members'
callbacks, so they include the clients' own delays (librdkafka's rejoin and its
callbacks served on poll), as an application would see them.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.report import print_figures

TOPIC = "rebalance"
GROUP_MODES = ("eager", "cooperative", "consumer")
LABELS = {
    "eager": "classic eager (range)",
    "cooperative": "classic cooperative-sticky",
    "consumer": "consumer protocol (KIP-848, uniform)",
}
QUIET_HEARTBEATS = 3  # no ownership change for this long: the group has settled
TARGET_UNAFFECTED = 0
TARGET_HEARTBEATS = 2
GOAL = "issue: no partition of an unaffected member paused; stable within 2 heartbeats"


@dataclass(frozen=True)
class Sizes:
    members: int = 100
    partitions: int = 1000
    processes: int = 4
    repeats: int = 3
    heartbeat_ms: int = 1000
    settle_timeout_s: float = 900.0


MODES = {
    "quick": Sizes(members=10, partitions=100, processes=2, repeats=1, settle_timeout_s=300.0),
    "default": Sizes(),
    "full": Sizes(repeats=5),
}


# -- pure helpers (tests/bench/test_rebalance.py) -------------------------------------------


@dataclass(frozen=True)
class Callback:
    """One rebalance callback of one member: `kind` assign, revoke or lost, with the
    partitions it names (incremental, or the whole assignment for eager)."""

    t: float
    member: str
    kind: str
    parts: frozenset[int]


def apply(owned: dict[str, frozenset[int]], cb: Callback) -> bool:
    """Apply one callback to `owned` (member -> partitions); whether it changed it."""
    held = owned.get(cb.member, frozenset())
    after = held | cb.parts if cb.kind == "assign" else held - cb.parts
    owned[cb.member] = after
    return after != held


def covers(owned: Mapping[str, frozenset[int]], members: Iterable[str], partitions: int) -> bool:
    """Whether `members` each own some partition and together own 0..partitions-1,
    each exactly once."""
    sets = [owned.get(m, frozenset()) for m in members]
    if not sets or not all(sets):
        return False
    return sum(map(len, sets)) == partitions and frozenset().union(*sets) == frozenset(
        range(partitions)
    )


def owners(owned: Mapping[str, frozenset[int]]) -> dict[int, str]:
    return {p: m for m, parts in owned.items() for p in parts}


@dataclass(frozen=True)
class Cost:
    """What one member's join cost the group."""

    moved: int  # partitions whose owner changed
    unaffected_paused: int  # kept by their owner, revoked in between
    paused: int  # partitions revoked from their owner, moved ones included
    members_disturbed: int  # members that had a partition revoked
    stable_s: float  # from the subscribe() call to the last change of ownership
    callbacks: int

    def heartbeats(self, heartbeat_ms: int) -> float:
        return self.stable_s * 1000 / heartbeat_ms


def rebalance_cost(
    before: Mapping[str, frozenset[int]], callbacks: Sequence[Callback], t0: float
) -> Cost:
    """Replay `callbacks` (in order) from the ownership `before` the join, whose new
    member subscribed at `t0`."""
    owned = dict(before)
    revoked: dict[str, set[int]] = {}
    last_change = t0
    for cb in callbacks:
        if apply(owned, cb):
            last_change = max(last_change, cb.t)
        if cb.kind != "assign" and cb.parts:
            revoked.setdefault(cb.member, set()).update(cb.parts)
    was, now = owners(before), owners(owned)
    moved = sum(1 for p, m in now.items() if was.get(p) != m)
    unaffected = sum(1 for p, m in now.items() if was.get(p) == m and p in revoked.get(m, ()))
    return Cost(
        moved=moved,
        unaffected_paused=unaffected,
        paused=len(set().union(*revoked.values())) if revoked else 0,
        members_disturbed=sum(1 for parts in revoked.values() if parts),
        stable_s=last_change - t0,
        callbacks=len(callbacks),
    )


def join_phase(rep: int, repeats: int) -> float:
    """Where in the heartbeat interval join `rep` of `repeats` starts, as a fraction:
    evenly spread, (rep + 0.5) / repeats."""
    return (rep + 0.5) / repeats


def next_at_phase(origin: float, now: float, interval: float, phase: float) -> float:
    """The first time >= `now` that lies `phase` of an `interval` after a whole
    number of intervals from `origin`."""
    first = origin + phase * interval
    return first + max(0, math.ceil((now - first) / interval)) * interval


def spread(names: Sequence[str], processes: int) -> list[list[str]]:
    """`names` dealt over `processes` lists as evenly as possible (none empty)."""
    n = max(1, min(processes, len(names)))
    return [list(names[i::n]) for i in range(n)]


# -- the member processes and their events ------------------------------------------------------


class Group:
    """The member processes of one group and what their callbacks say: `owned`
    (member -> partitions), every callback in arrival order, and the subscribe and
    close times of each member. Reader threads fill it; read it under `lock`."""

    def __init__(
        self,
        broker: subprocess.Popen,
        bootstrap: str,
        group: str,
        mode: str,
        names: list[str],
        sizes: Sizes,
    ):
        self.broker = broker
        self.bootstrap = bootstrap
        self.name = group
        self.mode = mode
        self.sizes = sizes
        self.lock = threading.Lock()
        self.owned: dict[str, frozenset[int]] = {}
        self.callbacks: list[Callback] = []
        self.last_change = time.monotonic()
        self.subscribed: dict[str, float] = {}
        self.closed: dict[str, float] = {}
        self.errors: list[str] = []
        self.ready = 0
        self.admin = None  # an AdminClient, made on first describe()
        self.procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.rebalance_members",
                    "--bootstrap",
                    bootstrap,
                    "--group",
                    group,
                    "--topic",
                    TOPIC,
                    "--mode",
                    mode,
                    "--heartbeat-ms",
                    str(sizes.heartbeat_ms),
                    "--names",
                    ",".join(share),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
            for share in spread(names, sizes.processes)
        ]
        self.readers = [
            threading.Thread(target=self._read, args=(p,), daemon=True) for p in self.procs
        ]
        for r in self.readers:
            r.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            kind = ev.get("event")
            with self.lock:
                if kind in ("assign", "revoke", "lost"):
                    cb = Callback(ev["t"], ev["m"], kind, frozenset(ev["parts"]))
                    self.callbacks.append(cb)
                    if apply(self.owned, cb):
                        self.last_change = max(self.last_change, cb.t)
                elif kind == "subscribe":
                    self.subscribed[ev["m"]] = ev["t"]
                elif kind == "closed":
                    self.closed[ev["m"]] = ev["t"]
                    if self.owned.pop(ev["m"], frozenset()):  # no revoke callback on close
                        self.last_change = max(self.last_change, ev["t"])
                elif kind == "ready":
                    self.ready += 1
                elif kind == "error":
                    self.errors.append(f"{ev.get('m', '?')}: {ev['error']}")

    def send(self, command: str, proc: int | None = None) -> None:
        for p in self.procs if proc is None else [self.procs[proc]]:
            p.stdin.write(command + "\n")
            p.stdin.flush()

    def wait(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.broker.poll() is not None:
                raise RuntimeError(f"{self.mode}: the broker exited with {self.broker.returncode}")
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{self.mode}: a member process exited with {p.returncode}")
            with self.lock:
                if condition():
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.mode}: {what} after {timeout:.0f}s")
            time.sleep(0.05)

    def wait_settled(self, members: set[str], timeout: float) -> None:
        """Until `members` own every partition once and nothing moved for a while."""
        quiet = QUIET_HEARTBEATS * self.sizes.heartbeat_ms / 1000

        def settled() -> bool:
            return (
                covers(self.owned, members, self.sizes.partitions)
                and time.monotonic() - self.last_change >= quiet
            )

        self.wait(settled, timeout, f"{len(members)} members did not settle")

    def describe(self, members: set[str]) -> str:
        """'' if the broker describes the group Stable with exactly `members` (and, for
        the consumer protocol, every assignment equal to its target); else what it says."""
        from confluent_kafka import ConsumerGroupState, KafkaException
        from confluent_kafka.admin import AdminClient

        if self.admin is None:
            self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = self.admin.describe_consumer_groups([self.name], request_timeout=30)
        try:
            d = futures[self.name].result(60)
        except KafkaException as e:
            return f"not described: {e.args[0]}"
        seen = {m.client_id for m in d.members}
        if d.state != ConsumerGroupState.STABLE or seen != members:
            return f"{d.state.name} with {len(seen)} members"
        pending = [
            m.client_id
            for m in d.members
            if m.target_assignment is not None
            and _parts(m.assignment) != _parts(m.target_assignment)
        ]
        return f"{len(pending)} members short of their target" if pending else ""

    def describe_stable(self, members: set[str]) -> str:
        """describe() until it says Stable (a few heartbeats at most); its last word."""
        deadline = time.monotonic() + 10 * self.sizes.heartbeat_ms / 1000
        while True:
            said = self.describe(members)
            if not said or time.monotonic() > deadline:
                return said
            time.sleep(0.2)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    self.send("quit", self.procs.index(p))
                except OSError:
                    pass
        for p in self.procs:
            try:
                p.wait(180)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        for r in self.readers:
            r.join(10)


def _parts(assignment) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in assignment.topic_partitions}


@dataclass(frozen=True)
class Join:
    cost: Cost
    described: str  # '' when Stable with every member


def run_mode(
    broker: subprocess.Popen, bootstrap: str, mode: str, sizes: Sizes
) -> tuple[float, list[Join]]:
    """Settle a group of `sizes.members` in `mode`, then `sizes.repeats` times: one
    member joins (measured), then leaves. Returns (seconds to the first settle, joins)."""
    names = [f"{mode}-m{i}" for i in range(sizes.members)]
    everyone = set(names)
    group = Group(broker, bootstrap, f"rebalance-{mode}", mode, names, sizes)
    joins: list[Join] = []
    try:
        group.wait(lambda: group.ready == len(group.procs), 300, "member processes not ready")
        t_go = time.monotonic()
        group.send("go")
        group.wait_settled(everyone, sizes.settle_timeout_s)
        settle_s = group.last_change - t_go
        said = group.describe_stable(everyone)
        print(
            f"  {LABELS[mode]}: {sizes.members} members settled in {settle_s:.1f} s"
            f" ({said or 'Stable'})",
            flush=True,
        )
        hb_s = sizes.heartbeat_ms / 1000
        for rep in range(sizes.repeats):
            new = f"{mode}-join{rep}"
            phase = join_phase(rep, sizes.repeats)
            at = next_at_phase(group.last_change, time.monotonic(), hb_s, phase)
            time.sleep(max(0.0, at - time.monotonic()))
            with group.lock:
                before = dict(group.owned)
                first = len(group.callbacks)
            group.send(f"add {new}", rep % len(group.procs))
            group.wait(lambda n=new: n in group.subscribed, 120, f"{new} did not subscribe")
            group.wait_settled(everyone | {new}, sizes.settle_timeout_s)
            with group.lock:
                cost = rebalance_cost(before, group.callbacks[first:], group.subscribed[new])
            joins.append(Join(cost, group.describe_stable(everyone | {new})))
            print(
                f"  {LABELS[mode]} join {rep + 1}/{sizes.repeats}: stable after"
                f" {cost.stable_s * 1000:,.0f} ms ({cost.heartbeats(sizes.heartbeat_ms):.1f}"
                f" heartbeats), {cost.unaffected_paused} unaffected partitions paused,"
                f" {cost.paused} paused in all, {cost.moved} moved,"
                f" {cost.members_disturbed} members disturbed"
                f" ({joins[-1].described or 'Stable'})",
                flush=True,
            )
            group.send(f"close {new}", rep % len(group.procs))
            group.wait(lambda n=new: n in group.closed, 120, f"{new} did not close")
            group.wait_settled(everyone, sizes.settle_timeout_s)
        if group.errors:
            print(f"  client errors: {len(group.errors)}, first: {group.errors[0]}", flush=True)
        return settle_s, joins
    finally:
        group.stop()


def run(sizes: Sizes, modes: Sequence[str] = GROUP_MODES) -> dict[str, tuple[float, list[Join]]]:
    from confluent_kafka.admin import AdminClient, NewTopic

    from testkit.procs import BrokerProcess

    root = Path(tempfile.mkdtemp(prefix="bench-rebalance-"))
    broker = BrokerProcess(
        root / "data", settings={"group.consumer.heartbeat.interval.ms": sizes.heartbeat_ms}
    )
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, sizes.partitions, 1)])[TOPIC].result(120)
        del admin  # its connection would otherwise idle through the run
        results = {}
        for mode in modes:
            print(f"{LABELS[mode]}: {sizes.members} members", flush=True)
            results[mode] = run_mode(broker.proc, broker.bootstrap, mode, sizes)
        return results
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- the report ---------------------------------------------------------------------------------


def _median(joins: list[Join], field: str) -> float:
    return statistics.median(getattr(j.cost, field) for j in joins)


def _hb(joins: list[Join], sizes: Sizes) -> float:
    return statistics.median(j.cost.heartbeats(sizes.heartbeat_ms) for j in joins)


def table(results: Mapping[str, tuple[float, list[Join]]], sizes: Sizes) -> str:
    """The side-by-side table, one row per join, medians last."""
    head = (
        "protocol",
        "join",
        "unaffected paused",
        "paused",
        "moved",
        "members disturbed",
        "stable ms",
        "heartbeats",
        "described",
    )
    rows = [head]
    for mode, (_, joins) in results.items():
        for i, j in enumerate(joins):
            c = j.cost
            rows.append(
                (
                    LABELS[mode],
                    str(i + 1),
                    str(c.unaffected_paused),
                    str(c.paused),
                    str(c.moved),
                    str(c.members_disturbed),
                    f"{c.stable_s * 1000:,.0f}",
                    f"{c.heartbeats(sizes.heartbeat_ms):.1f}",
                    j.described or "Stable",
                )
            )
        if len(joins) > 1:
            rows.append(
                (
                    LABELS[mode],
                    "median",
                    f"{_median(joins, 'unaffected_paused'):g}",
                    f"{_median(joins, 'paused'):g}",
                    f"{_median(joins, 'moved'):g}",
                    f"{_median(joins, 'members_disturbed'):g}",
                    f"{_median(joins, 'stable_s') * 1000:,.0f}",
                    f"{_hb(joins, sizes):.1f}",
                    "",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def to_figures(results: Mapping[str, tuple[float, list[Join]]], sizes: Sizes) -> list[dict]:
    where = (
        f"one member joins {sizes.members} consuming {sizes.partitions:,} partitions"
        f" (heartbeat {sizes.heartbeat_ms} ms)"
    )
    common = (
        f"{len(next(iter(results.values()))[1])} joins, median; {sizes.members} confluent-kafka"
        f" consumers in {sizes.processes} processes, one broker; timed from the joining"
        " member's subscribe() to the last callback that changed ownership; joins at"
        " evenly spread phases of the heartbeat interval"
    )

    def others(mode: str, text) -> str:
        return "; ".join(f"{LABELS[m]} {text(j)}" for m, (_, j) in results.items() if m != mode)

    out = []
    for mode, (settle_s, joins) in results.items():
        goal = mode == "consumer"
        out += [
            {
                "area": "rebalance",
                "metric": f"{LABELS[mode]}: partitions of unaffected members paused, {where}",
                "value": _median(joins, "unaffected_paused"),
                "unit": "partitions",
                "target": f"<= {TARGET_UNAFFECTED}" if goal else "",
                "reference": GOAL if goal else "",
                "peer": others(mode, lambda j: f"{_median(j, 'unaffected_paused'):g}")
                if goal
                else "",
                "detail": f"{common}; paused in all {_median(joins, 'paused'):g}, moved"
                f" {_median(joins, 'moved'):g}, members that had a partition revoked"
                f" {_median(joins, 'members_disturbed'):g}; the first {sizes.members} settled"
                f" {settle_s:.1f} s after subscribing",
            },
            {
                "area": "rebalance",
                "metric": f"{LABELS[mode]}: partitions paused in all (moved ones included),"
                f" {where}",
                "value": _median(joins, "paused"),
                "unit": "partitions",
            },
            {
                "area": "rebalance",
                "metric": f"{LABELS[mode]}: time to a stable assignment, {where}",
                "value": _median(joins, "stable_s") * 1000,
                "unit": "ms",
                "detail": "joins: "
                + ", ".join(f"{j.cost.stable_s * 1000:,.0f}" for j in joins)
                + " ms",
            },
            {
                "area": "rebalance",
                "metric": f"{LABELS[mode]}: time to a stable assignment in heartbeat intervals,"
                f" {where}",
                "value": _hb(joins, sizes),
                "unit": "heartbeats",
                "target": f"<= {TARGET_HEARTBEATS}" if goal else "",
                "reference": GOAL if goal else "",
                "peer": others(mode, lambda j: f"{_hb(j, sizes):.1f}") if goal else "",
            },
        ]
    described = {m: [j.described for j in joins] for m, (_, joins) in results.items()}
    bad = [f"{LABELS[m]}: {s}" for m, said in described.items() for s in said if s]
    out.append(
        {
            "area": "rebalance",
            "metric": "group Stable with every member after every join (DescribeGroups,"
            " ConsumerGroupDescribe: no revocation pending)",
            "value": f"{sum(not s for said in described.values() for s in said)} of"
            f" {sum(map(len, described.values()))}",
            "unit": "",
            "ok": not bad,
            "detail": "; ".join(bad) if bad else "",
        }
    )
    return out


def figures(mode: str) -> list[dict]:
    sizes = MODES[mode]
    print(f"rebalance benchmark, {mode}: {sizes}", flush=True)
    results = run(sizes)
    print(table(results, sizes), flush=True)
    return to_figures(results, sizes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    d = Sizes()
    ap.add_argument("--quick", action="store_true", help="10 members, 100 partitions, 1 join")
    ap.add_argument("--members", type=int, default=None, help=f"default {d.members}")
    ap.add_argument("--partitions", type=int, default=None, help=f"default {d.partitions}")
    ap.add_argument("--processes", type=int, default=None, help=f"default {d.processes}")
    ap.add_argument("--repeats", type=int, default=None, help=f"joins per protocol ({d.repeats})")
    ap.add_argument("--heartbeat-ms", type=int, default=None, help=f"default {d.heartbeat_ms}")
    ap.add_argument(
        "--modes",
        default=",".join(GROUP_MODES),
        help="comma list of " + ", ".join(GROUP_MODES) + " (default all, in this order)",
    )
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(GROUP_MODES)
    if unknown or not modes:
        ap.error(f"--modes: unknown {', '.join(sorted(unknown)) or 'empty list'}")
    sizes = MODES["quick"] if args.quick else MODES["default"]
    changes = {
        k: getattr(args, k)
        for k in Sizes.__dataclass_fields__
        if getattr(args, k, None) is not None
    }
    sizes = replace(sizes, **changes)
    if min(sizes.members, sizes.processes, sizes.repeats, sizes.heartbeat_ms) < 1:
        ap.error("--members, --processes, --repeats and --heartbeat-ms must be positive")
    if sizes.partitions <= sizes.members:
        ap.error(
            "--partitions must exceed --members (every member, the joining one too, owns some)"
        )
    results = run(sizes, modes)
    print(table(results, sizes))
    print_figures(to_figures(results, sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
