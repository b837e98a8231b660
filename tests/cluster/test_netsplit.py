"""Network partitions: ZooKeeper and three brokers in their own network namespaces.

Each test builds its own namespaces (tests/cluster/netns.py): ZooKeeper, brokers 0-2
and a client, on a private bridge. One topic, RF 3, min.insync.replicas=2; two
idempotent acks=all producers (confluent-kafka and kafka-python) write numbered
records from the client namespace the whole time, while iptables DROP rules cut:

  a) the partition leader off from ZooKeeper and both followers (clients still reach it),
  b) one follower off from ZooKeeper, the leader and the other follower,
  c) ZooKeeper off from every broker,

and heal the cut after a while. After the heal: every acknowledged record is read back
once, at the offset its acknowledgement gave; each leader epoch had one leader; the
old leader's uncommitted suffix was truncated (a); the three replicas' segment files
hold identical records; the cluster takes writes again. Figures go to stdout
(`pytest -s`), one `netsplit[...]` line per run.

In (a) the isolated leader still answers Metadata as leader (it cannot know better
until it reaches ZooKeeper again), so clients that talk to it only move to the new
leader when their requests time out (request timeout 10 s here); with a 10 s cut that
is after the heal. Its acks=all writes can never complete meanwhile (its ISR cannot
shrink without ZooKeeper), which is what keeps the two leaders from both committing.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.records import iter_batches
from testkit.procs import wait_until
from tests.cluster.netns import NetLab, NetnsCluster, NetnsUnavailable
from tests.cluster.util import ZkView

TOPIC = "netsplit"

SETTINGS = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "replica.socket.timeout.ms": 3000,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 3,
    "leader.imbalance.check.interval.seconds": 2,
    "controlled.shutdown.timeout.ms": 5000,
    "log.cleaner.enable": "false",
}


@pytest.fixture
def netcluster(tmp_path):
    """(lab, cluster, zk view); the test thread runs in the client namespace."""
    try:
        lab = NetLab()
    except NetnsUnavailable as e:
        pytest.fail(f"network-partition test cannot run here: {e}", pytrace=False)
    zk = None
    try:
        cluster = NetnsCluster(lab, tmp_path / "cluster", settings=SETTINGS)
        with lab.inside("client"):
            cluster.start()
            zk = ZkView(cluster.zk_connect)
            try:
                yield lab, cluster, zk
            finally:
                lab.heal_all()
                zk.close()
                cluster.stop(timeout=20)
    finally:
        lab.close()


# -- the workload -----------------------------------------------------------------------


@dataclass
class Ack:
    producer: str
    seq: int
    offset: int
    at: float


@dataclass
class Producers:
    """A confluent-kafka and a kafka-python producer, idempotent, acks=all, each
    writing `<name>-<seq>` records in its own thread until `stop()`."""

    bootstrap: str
    acks: list[Ack] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sent: Counter = field(default_factory=Counter)
    done: Counter = field(default_factory=Counter)

    def __post_init__(self):
        self.flush_s = 180.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._confluent, name="ck-producer"),
            threading.Thread(target=self._kafka_python, name="kp-producer"),
        ]

    def start(self) -> Producers:
        for t in self._threads:
            t.start()
        return self

    def acked(self) -> int:
        return len(self.acks)

    def _ok(self, name: str, seq: int, offset: int) -> None:
        with self._lock:
            self.acks.append(Ack(name, seq, offset, time.time()))
            self.done[name] += 1

    def _fail(self, name: str, seq: int, err) -> None:
        with self._lock:
            self.errors.append(f"{name}-{seq}: {err}")
            self.done[name] += 1

    def _throttle(self, name: str) -> bool:
        """Keep at most 400 records of one producer unanswered."""
        return self.sent[name] - self.done[name] > 400

    def _confluent(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 180000,
                "request.timeout.ms": 10000,
                "topic.metadata.refresh.interval.ms": 1000,
                "retry.backoff.ms": 100,
                "reconnect.backoff.max.ms": 500,
                "error_cb": lambda err: (
                    self.errors.append(f"ck fatal: {err}") if err.fatal() else None
                ),
            }
        )

        def report(err, msg, seq):
            if err is None:
                self._ok("ck", seq, msg.offset())
            else:
                self._fail("ck", seq, err)

        while not self._stop.is_set():
            if self._throttle("ck"):
                p.poll(0.05)
                continue
            seq = self.sent["ck"]
            p.produce(
                TOPIC,
                b"ck-%d" % seq,
                partition=0,
                on_delivery=lambda err, msg, seq=seq: report(err, msg, seq),
            )
            self.sent["ck"] += 1
            p.poll(0.004)
        p.flush(self.flush_s)

    def _kafka_python(self) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=10000,
            delivery_timeout_ms=180000,
            metadata_max_age_ms=1000,
            retry_backoff_ms=100,
            reconnect_backoff_max_ms=500,
            max_block_ms=120000,
        )
        try:
            while not self._stop.is_set():
                if self._throttle("kp"):
                    time.sleep(0.05)
                    continue
                seq = self.sent["kp"]
                future = p.send(TOPIC, value=b"kp-%d" % seq, partition=0)
                self.sent["kp"] += 1
                future.add_callback(lambda md, seq=seq: self._ok("kp", seq, md.offset))
                future.add_errback(lambda e, seq=seq: self._fail("kp", seq, e))
                time.sleep(0.004)
            p.flush(self.flush_s)
        except KafkaTimeoutError:
            pass
        finally:
            p.close(5)

    def stop(self, flush_s: float) -> None:
        self.flush_s = flush_s
        self._stop.set()
        for t in self._threads:
            t.join(flush_s + 20)


# -- reading the result back ---------------------------------------------------------------


def read_replica(data_dir: Path, topic: str = TOPIC, partition: int = 0) -> list[tuple]:
    """(offset, leader epoch, value) of every record in a replica's segment files."""
    out = []
    for seg in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        data = seg.read_bytes()
        for batch in iter_batches(data, validate=False, allow_partial_tail=True):
            for r in batch.records():
                out.append((r.offset, batch.partition_leader_epoch, r.value))
    return out


def consume_all(bootstrap: str, timeout: float = 60.0) -> list[tuple]:
    """(offset, leader epoch, value) of everything committed, read by a consumer."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"netsplit-reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        _, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=20)
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + timeout
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.offset(), msg.leader_epoch(), msg.value()))
        assert out and out[-1][0] >= high - 1, f"read {len(out)} records, high watermark {high}"
        return out
    finally:
        c.close()


_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+: (.*)$")


def log_events(path: Path) -> list[tuple[float, str]]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        m = _LINE.match(line)
        if m:
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            events.append((at, m.group(2)))
    return events


def leadership(cluster: NetnsCluster) -> list[tuple[int, int, float, float]]:
    """(broker, epoch, from, until) for every period a broker believed it led the
    topic's partition, from the brokers' own logs."""
    periods = []
    for b in range(cluster.count):
        current = None
        for at, text in log_events(cluster.log_path(b)):
            m = re.match(rf"{TOPIC}-0: leader in epoch (\d+)", text)
            ended = re.match(rf"{TOPIC}-0: follower of", text) or text.startswith(
                "ZooKeeper session expired"
            )
            if m:
                if current is not None:
                    periods.append((b, current[0], current[1], at))
                current = (int(m.group(1)), at)
            elif ended and current is not None:
                periods.append((b, current[0], current[1], at))
                current = None
        if current is not None:
            periods.append((b, current[0], current[1], float("inf")))
    return periods


def truncations(cluster: NetnsCluster, b: int) -> list[tuple[float, int, int]]:
    out = []
    for at, text in log_events(cluster.log_path(b)):
        m = re.match(rf"{TOPIC}-0: truncating from (\d+) to (\d+)", text)
        if m:
            out.append((at, int(m.group(1)), int(m.group(2))))
    return out


# -- the scenarios ---------------------------------------------------------------------------


def _setup_topic(cluster: NetnsCluster, zk: ZkView) -> None:
    wait_until(lambda: len(zk.live()) == cluster.count, what="every broker to register")
    for b in range(cluster.count):
        admin = AdminClient({"bootstrap.servers": cluster.address(b)})
        wait_until(
            lambda admin=admin: len(admin.list_topics(timeout=5).brokers) == cluster.count,
            what=f"broker {b} to see every broker",
        )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    fut = admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])
    fut[TOPIC].result(20)
    wait_until(
        lambda: (s := zk.state(TOPIC)) and s["leader"] >= 0 and len(s["isr"]) == 3,
        what="the topic's leader and full ISR",
    )


def _full(zk: ZkView) -> bool:
    s = zk.state(TOPIC)
    return len(zk.live()) == 3 and s is not None and s["leader"] >= 0 and len(s["isr"]) == 3


def run_scenario(lab: NetLab, cluster: NetnsCluster, zk: ZkView, kind: str, cut_s: float):
    _setup_topic(cluster, zk)
    producers = Producers(cluster.bootstrap).start()
    figures: dict = {"scenario": kind, "cut_s": cut_s}
    try:
        wait_until(lambda: producers.acked() >= 500, timeout=60, what="500 acknowledged records")
        state = zk.state(TOPIC)
        leader, epoch = state["leader"], state["leader_epoch"]
        followers = [b for b in range(3) if b != leader]
        node = cluster.node
        at_cut = producers.acked()
        t_cut = time.time()
        if kind == "leader":
            lab.isolate(node(leader), ["zk", *(node(f) for f in followers)])
        elif kind == "follower":
            victim = followers[0]
            lab.isolate(node(victim), ["zk", node(leader), node(followers[1])])
        elif kind == "zookeeper":
            for b in range(3):
                lab.cut("zk", node(b))
        else:
            raise ValueError(kind)
        figures.update(leader=leader, epoch=epoch)

        if kind == "leader":
            wait_until(
                lambda: (
                    (s := zk.state(TOPIC))["leader"] not in (-1, leader)
                    and s["leader_epoch"] > epoch
                ),
                timeout=cut_s,
                what="a new leader while the old one is cut off",
            )
            figures["elect_s"] = round(time.time() - t_cut, 2)
            figures["new_leader"] = zk.state(TOPIC)["leader"]
            t_elect = time.time()
        elif kind == "follower":
            wait_until(
                lambda: victim not in zk.state(TOPIC)["isr"],
                timeout=cut_s,
                what="the cut follower to leave the ISR",
            )
            figures["isr_shrink_s"] = round(time.time() - t_cut, 2)
            at_shrink = producers.acked()
            wait_until(
                lambda: producers.acked() > at_shrink + 100,
                timeout=max(1, t_cut + cut_s - time.time()),
                what="acks with the follower cut off",
            )
        else:
            wait_until(
                lambda: not zk.live(), timeout=cut_s, what="every broker's session to expire"
            )
            figures["sessions_expired_s"] = round(time.time() - t_cut, 2)
        time.sleep(max(0.0, t_cut + cut_s - time.time()))  # the deliberate cut duration
        t_heal = time.time()
        figures["acked_during_cut"] = producers.acked() - at_cut
        figures["last_ack_before_heal_s"] = round(
            max([a.at for a in producers.acks[at_cut:]], default=t_cut) - t_cut, 2
        )
        if kind == "leader":  # clients find the new leader once their requests time out
            after = [a.at for a in producers.acks[at_cut:] if a.at > t_elect]
            figures["first_ack_from_new_leader_s"] = (
                round(min(after) - t_cut, 2) if after else "after-heal"
            )
        lab.heal_all()

        wait_until(lambda: _full(zk), timeout=90, what="live brokers and a full ISR after heal")
        figures["converge_s"] = round(time.time() - t_heal, 2)
        at_full = producers.acked()
        wait_until(
            lambda: producers.acked() > at_full + 300, timeout=60, what="acks after the heal"
        )
        figures["serve_again_s"] = round(time.time() - t_heal, 2)
        first_after_heal = min(a.at for a in producers.acks[at_cut:] if a.at > t_heal)
        figures["first_ack_after_heal_s"] = round(first_after_heal - t_heal, 2)
    except BaseException:
        producers.stop(flush_s=5)
        raise
    producers.stop(flush_s=180)
    final = zk.state(TOPIC)
    figures.update(final_leader=final["leader"], final_epoch=final["leader_epoch"])
    check_outcome(cluster, producers, figures, kind)
    print(f"\nnetsplit[{kind}] " + " ".join(f"{k}={v}" for k, v in figures.items()))
    return figures


def check_outcome(cluster: NetnsCluster, producers: Producers, figures: dict, kind: str):
    acks = producers.acks
    figures["acked"] = len(acks)
    figures["sent"] = sum(producers.sent.values())
    figures["failed"] = len(producers.errors)
    fatal = [e for e in producers.errors if "fatal" in e]
    assert not fatal, f"fatal producer errors: {fatal[:5]}"
    other = [e for e in producers.errors if "timed out" not in e.lower()]
    assert not other, f"produce errors other than timeouts: {other[:5]}"

    # The three replicas converge on identical logs (read from their segment files).
    t0 = time.time()
    replicas = wait_until(
        lambda: (
            (r := [read_replica(cluster.data_dir(b)) for b in range(3)])[0] == r[1] == r[2] and r
        ),
        timeout=60,
        what="the three replicas' logs to be identical",
        every=0.5,
    )
    figures["replicas_identical_after_s"] = round(time.time() - t0, 2)
    log = replicas[0]
    figures["log_end_offset"] = log[-1][0] + 1 if log else 0

    # Everything acknowledged is there once, at the acknowledged offset; the consumer
    # sees exactly the replicas' log.
    consumed = consume_all(cluster.bootstrap)
    assert [(o, v) for o, _, v in consumed] == [(o, v) for o, _, v in log], (
        "consumer and replica files differ"
    )
    at = {v: o for o, _, v in log}
    counts = Counter(v for _, _, v in log)
    dups = [v for v, n in counts.items() if n > 1]
    assert not dups, f"{len(dups)} records stored twice, e.g. {dups[:3]}"
    offsets = Counter(a.offset for a in acks)
    assert not [o for o, n in offsets.items() if n > 1], "two acks for one offset"
    lost = [a for a in acks if f"{a.producer}-{a.seq}".encode() not in at]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:3]}"
    moved = [a for a in acks if at[f"{a.producer}-{a.seq}".encode()] != a.offset]
    assert not moved, f"{len(moved)} acknowledged records at another offset, e.g. {moved[:3]}"
    for name in ("ck", "kp"):
        seqs = [int(v.split(b"-")[1]) for _, _, v in log if v.startswith(name.encode())]
        assert seqs == sorted(seqs), f"{name} records out of order"

    # One leader per epoch (from the brokers' logs), and the records of each epoch in
    # the final log were appended in that epoch's leader's term.
    periods = leadership(cluster)
    by_epoch: dict[int, set[int]] = {}
    for b, e, _, _ in periods:
        by_epoch.setdefault(e, set()).add(b)
    assert all(len(bs) == 1 for bs in by_epoch.values()), f"two leaders in one epoch: {by_epoch}"
    overlap = 0.0
    for b1, _, s1, u1 in periods:
        for b2, _, s2, u2 in periods:
            if b1 < b2:
                overlap = max(overlap, min(u1, u2) - max(s1, s2))
    figures["dual_leader_belief_s"] = round(max(0.0, overlap), 2)
    assert set(e for _, e, _ in log) <= set(by_epoch), "records of an epoch nobody led"

    if kind == "leader":
        old, epoch = figures["leader"], figures["epoch"]
        cuts = truncations(cluster, old)
        assert cuts, f"old leader {old} never truncated its log"
        _, frm, to = cuts[-1]
        later = [o for o, e, _ in log if e > epoch]
        assert later, "no records written after the leader change"
        assert to == min(later), f"old leader truncated to {to}, new epoch starts at {min(later)}"
        figures["truncated_on_old_leader"] = frm - to
        figures["new_epoch_start_offset"] = to


# -- tests -------------------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_leader_cut_off_short(netcluster):
    """Scenario a with a 10 s cut: the normal suite's partition test."""
    figures = run_scenario(*netcluster, "leader", cut_s=10)
    assert figures["truncated_on_old_leader"] > 0


@pytest.mark.soak
@pytest.mark.timeout(400)
@pytest.mark.parametrize("cut_s", [30])
def test_leader_cut_off(netcluster, cut_s):
    figures = run_scenario(*netcluster, "leader", cut_s=cut_s)
    assert figures["truncated_on_old_leader"] > 0


@pytest.mark.soak
@pytest.mark.timeout(400)
@pytest.mark.parametrize("cut_s", [20])
def test_follower_cut_off(netcluster, cut_s):
    figures = run_scenario(*netcluster, "follower", cut_s=cut_s)
    assert figures["final_leader"] == figures["leader"], "leadership moved for a follower cut"


@pytest.mark.soak
@pytest.mark.timeout(400)
@pytest.mark.parametrize("cut_s", [20])
def test_zookeeper_unreachable(netcluster, cut_s):
    run_scenario(*netcluster, "zookeeper", cut_s=cut_s)


def test_lab_cleans_up_after_itself():
    """Namespaces, veths and processes are gone after close(), even mid-cut."""
    from tests.cluster.netns import lab_namespaces

    try:
        lab = NetLab()
    except NetnsUnavailable as e:
        pytest.fail(f"network-partition test cannot run here: {e}", pytrace=False)
    try:
        lab.add("x")
        lab.add("y")
        lab.cut("x", "y")
        proc = lab.popen("x", ["sleep", "600"], Path("/dev/null"))
        assert any(ns.startswith(lab.tag) for ns in lab_namespaces())
    finally:
        lab.close()
    assert proc.poll() is not None
    assert not [ns for ns in lab_namespaces() if ns.startswith(lab.tag)]


def test_cut_and_heal_drop_and_restore_traffic(tmp_path):
    """A cut drops packets both ways between two namespaces only; heal restores them."""
    import socket

    try:
        lab = NetLab()
    except NetnsUnavailable as e:
        pytest.fail(f"network-partition test cannot run here: {e}", pytrace=False)
    try:
        for name in ("srv", "a", "b"):
            lab.add(name)
        lab.popen(
            "srv",
            ["python3", "-m", "http.server", "8000", "-b", lab.ip("srv")],
            tmp_path / "srv.log",
        )

        def reaches(name: str) -> bool:
            with lab.inside(name):
                try:
                    with socket.create_connection((lab.ip("srv"), 8000), timeout=0.5):
                        return True
                except OSError:
                    return False

        wait_until(lambda: reaches("a") and reaches("b"), what="the server to listen")
        lab.cut("srv", "a")
        assert not reaches("a")
        assert reaches("b")
        lab.heal("srv", "a")
        assert reaches("a")
    finally:
        lab.close()
