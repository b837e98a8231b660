"""Partition reassignment (KIP-455) in a three-broker ZooKeeper cluster, with real
broker processes: a partition moves off its only replica onto two new brokers under
an acks=all producer and nothing acknowledged is lost; a move kept in flight (one new
replica paused with SIGSTOP) is listed and cancelled; a controller killed in the
middle of a move is replaced and its successor finishes it from the znodes; Kafka's
errors; `logflume reassign` end to end (generate, execute, verify); and moves written
by older tools to `/admin/reassign_partitions` (with kazoo): completed, the znode
deleted with the last, a refused one dropped, an API request winning, a new controller
reading a znode its predecessor left."""

import json
import signal
import subprocess
import sys
import threading
import time

import orjson
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import NoNodeError

from broker.protocol import ApiKey, ErrorCode
from tests.broker.server.wire import WireClient
from tests.cluster.util import producer, wait_until

ONE_REPLICA = {"min.insync.replicas": "1"}


def _create(cluster, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    made = admin.create_topics(
        [NewTopic(topic, len(assignment), replica_assignment=assignment, config=ONE_REPLICA)]
    )
    made[topic].result(20)
    for p, replicas in enumerate(assignment):
        wait_until(
            lambda p=p, r=replicas: (s := cluster.zk.state(topic, p)) and s["leader"] == r[0],
            what=f"{topic}-{p} to have its leader",
        )


def _alter(port: int, topic: str, partitions: dict[int, list[int] | None]) -> dict:
    body = {
        "timeout_ms": 10000,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "replicas": r} for p, r in partitions.items()
                ],
            }
        ],
    }
    with WireClient(port) as c:
        return c.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)


def _codes(answer: dict) -> dict[int, ErrorCode]:
    return {
        p["partition_index"]: ErrorCode(p["error_code"])
        for t in answer["responses"]
        for p in t["partitions"]
    }


def _listed(port: int, topics=None) -> dict:
    with WireClient(port) as c:
        return c.request(
            ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": topics}
        )


def _controller(cluster) -> int:
    """The controller's id, once there is one."""
    wait_until(lambda: cluster.zk.controller() >= 0, what="a controller")
    return cluster.zk.controller()


def _controller_port(cluster) -> int:
    return cluster.brokers[_controller(cluster)].port


def _topic_znode(cluster, topic: str) -> dict:
    return orjson.loads(cluster.zk.client.get(f"/brokers/topics/{topic}")[0])


def _settled(cluster, topic: str, p: int, replicas: list[int]) -> bool:
    """The move of `topic`-`p` to `replicas` is complete in ZooKeeper."""
    raw = _topic_znode(cluster, topic)
    state = cluster.zk.state(topic, p)
    return (
        raw["partitions"][str(p)] == replicas
        and not raw.get("adding_replicas")
        and not raw.get("removing_replicas")
        and state["leader"] in replicas
        and sorted(state["isr"]) == sorted(replicas)
    )


def _hosts(cluster, broker: int, topic: str, p: int = 0) -> bool:
    return (cluster.brokers[broker].data_dir / f"{topic}-{p}").exists()


def _read_all(cluster, topic: str, p: int = 0, timeout: float = 60.0) -> list[bytes]:
    """Every record of the partition, from its leader, up to its high watermark."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"r{time.monotonic_ns()}"})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
        c.assign([TopicPartition(topic, p, 0)])
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + timeout
        while len(got) < high and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                if m.error() is None:
                    got[m.offset()] = m.value()
        assert len(got) == high, f"read {len(got)} of {high}"
        return [got[o] for o in range(high)]
    finally:
        c.close()


def _produce(cluster, topic: str, values: list[bytes]) -> None:
    p = producer(cluster, acks="all")
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0


def _sizes(cluster, topic: str, brokers: list[int]) -> list[int]:
    """The partition's log size on each broker (DescribeLogDirs)."""
    out = []
    for b in brokers:
        with WireClient(cluster.brokers[b].port) as c:
            answer = c.request(
                ApiKey.DESCRIBE_LOG_DIRS, 2, {"topics": [{"topic": topic, "partitions": [0]}]}
            )
        parts = [p for t in answer["results"][0]["topics"] for p in t["partitions"]]
        out.append(parts[0]["partition_size"] if parts else -1)
    return out


def test_a_partition_moves_to_two_new_brokers_under_an_acks_all_producer(cluster_factory):
    cluster = cluster_factory()
    topic = "moved"
    _create(cluster, topic, [[0]])
    acked: list[bytes] = []
    errors: list[str] = []
    unflushed: list[int] = []
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.value())

    def produce_loop():
        p = producer(cluster, acks="all", **{"enable.idempotence": True})
        i = 0
        while not stop.is_set():
            p.produce(topic, b"%d" % i, on_delivery=on_delivery)
            i += 1
            p.poll(0.002)
        unflushed.append(p.flush(30))

    writer = threading.Thread(target=produce_loop)
    writer.start()
    try:
        wait_until(lambda: len(acked) >= 300, what="records acknowledged by broker 0")
        answer = _alter(_controller_port(cluster), topic, {0: [1, 2]})
        assert answer["error_code"] == ErrorCode.NONE
        assert _codes(answer) == {0: ErrorCode.NONE}
        wait_until(lambda: _settled(cluster, topic, 0, [1, 2]), 90, what="the move to complete")
        moved_at = len(acked)
        wait_until(lambda: len(acked) >= moved_at + 300, what="records acknowledged after it")
    finally:
        stop.set()
        writer.join(60)
    assert (errors, unflushed) == ([], [0])
    assert _read_all(cluster, topic) == acked == [b"%d" % i for i in range(len(acked))]
    # both new replicas hold the same log; broker 0 deleted its replica
    wait_until(lambda: len(set(_sizes(cluster, topic, [1, 2]))) == 1, what="equal replicas")
    assert _sizes(cluster, topic, [1, 2])[0] > 0
    wait_until(lambda: not _hosts(cluster, 0, topic), what="broker 0 to delete its replica")
    assert _sizes(cluster, topic, [0]) == [-1]
    assert _listed(_controller_port(cluster))["topics"] == []
    # the other new replica holds the same records: it serves them once it leads
    leader = cluster.zk.state(topic)["leader"]
    cluster.brokers[leader].stop(30)  # controlled shutdown hands leadership over
    wait_until(lambda: cluster.zk.state(topic)["leader"] == 3 - leader, what="the other replica")
    assert _read_all(cluster, topic) == acked


def test_a_move_in_flight_is_listed_and_cancelled(cluster_factory):
    cluster = cluster_factory()
    topic = "cancelled"
    _create(cluster, topic, [[0]])
    values = [b"%d" % i for i in range(100)]
    _produce(cluster, topic, values)
    controller = _controller(cluster)
    port = cluster.brokers[controller].port
    paused = 1 if controller == 2 else 2  # a new replica that cannot catch up
    other = 3 - paused
    cluster.brokers[paused].proc.send_signal(signal.SIGSTOP)
    try:
        # still registered (its session lasts 4 s): the controller takes the move
        answer = _alter(port, topic, {0: [1, 2]})
        assert _codes(answer) == {0: ErrorCode.NONE}
        listed = _listed(port, [{"name": topic, "partition_indexes": [0, 5]}])
        assert listed["topics"] == [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "replicas": [1, 2, 0],
                        "adding_replicas": [1, 2],
                        "removing_replicas": [0],
                    }
                ],
            }
        ]
        raw = _topic_znode(cluster, topic)
        assert raw["partitions"]["0"] == [1, 2, 0]
        assert raw["adding_replicas"] == {"0": [1, 2]}
        assert raw["removing_replicas"] == {"0": [0]}
        wait_until(lambda: other in cluster.zk.state(topic)["isr"], what="the live new replica")
        assert _listed(port)["topics"][0]["partitions"][0]["adding_replicas"] == [1, 2]

        cancelled = _alter(port, topic, {0: None})
        assert _codes(cancelled) == {0: ErrorCode.NONE}
        wait_until(lambda: _settled(cluster, topic, 0, [0]), what="the partition back on broker 0")
        assert _codes(_alter(port, topic, {0: None})) == {0: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
        assert _listed(port)["topics"] == []
        wait_until(lambda: not _hosts(cluster, other, topic), what="the added replica deleted")
    finally:
        cluster.brokers[paused].proc.send_signal(signal.SIGCONT)
    wait_until(lambda: paused in cluster.zk.live(), what="the paused broker back")
    wait_until(lambda: not _hosts(cluster, paused, topic), what="no replica on the paused broker")
    assert _read_all(cluster, topic) == values


def test_a_new_controller_finishes_a_move_its_predecessor_started(cluster_factory):
    cluster = cluster_factory()
    topic = "resumed"
    controller = _controller(cluster)
    source, target = [b for b in range(3) if b != controller]
    _create(cluster, topic, [[source]])
    values = [b"%d" % i for i in range(200)]
    _produce(cluster, topic, values)
    epoch = int(cluster.zk.client.get("/controller_epoch")[0])

    cluster.brokers[target].proc.send_signal(signal.SIGSTOP)  # the move cannot complete
    try:
        answer = _alter(cluster.brokers[controller].port, topic, {0: [target]})
        assert _codes(answer) == {0: ErrorCode.NONE}
        assert _topic_znode(cluster, topic)["adding_replicas"] == {"0": [target]}
        cluster.brokers[controller].kill()
        wait_until(lambda: cluster.zk.controller() not in (-1, controller), what="a new controller")
    finally:
        cluster.brokers[target].proc.send_signal(signal.SIGCONT)
    successor = cluster.zk.controller()
    assert successor == source  # the only broker awake
    cluster.brokers[controller].start()

    wait_until(lambda: _settled(cluster, topic, 0, [target]), 90, what="the move finished")
    state = cluster.zk.state(topic)
    assert state["leader"] == target
    assert state["controller_epoch"] > epoch  # written by the successor
    wait_until(lambda: not _hosts(cluster, source, topic), what="the old replica deleted")
    assert _read_all(cluster, topic) == values


def test_errors_as_kafka_answers_them(cluster_factory):
    cluster = cluster_factory()
    topic = "refused"
    _create(cluster, topic, [[0]])
    controller = _controller(cluster)
    port = cluster.brokers[controller].port
    elsewhere = next(b.port for i, b in cluster.brokers.items() if i != controller)
    answer = _alter(elsewhere, topic, {0: [1]})
    assert answer["error_code"] == ErrorCode.NOT_CONTROLLER
    assert answer["responses"] == []
    assert _listed(elsewhere)["error_code"] == ErrorCode.NOT_CONTROLLER

    answer = _alter(port, topic, {0: [1, 7], 1: [1]})
    assert _codes(answer) == {
        0: ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        1: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    message = answer["responses"][0]["partitions"][0]["error_message"]
    assert message == "Unknown broker(s) in replica assignment: 7."
    assert _codes(_alter(port, topic, {0: [1, 1]})) == {0: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _codes(_alter(port, topic, {0: []})) == {0: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _codes(_alter(port, topic, {0: None})) == {0: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    assert _codes(_alter(port, "nowhere", {0: [1]})) == {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _topic_znode(cluster, topic)["partitions"] == {"0": [0]}


def _reassign(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logflume", "reassign", "--bootstrap-server", cluster.bootstrap]
        + ["--command-config", "", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_command_generates_executes_and_verifies_a_move(cluster_factory, tmp_path):
    cluster = cluster_factory()
    topic = "by-cli"
    _create(cluster, topic, [[0], [0]])
    _produce(cluster, topic, [b"x"] * 20)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))

    done = _reassign(
        cluster, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1]) == {
        "version": 1,
        "partitions": [
            {"topic": topic, "partition": 0, "replicas": [0], "log_dirs": ["any"]},
            {"topic": topic, "partition": 1, "replicas": [0], "log_dirs": ["any"]},
        ],
    }
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = json.loads(lines[4])
    placed = [p["replicas"] for p in proposed["partitions"]]
    assert sorted(placed) == [[1], [2]]  # round-robin over the brokers listed
    plan = tmp_path / "plan.json"
    plan.write_text(lines[4])

    done = _reassign(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0:2] == ["Current partition replica assignment", ""]
    assert json.loads(lines[2]) == json.loads(_format({(topic, 0): [0], (topic, 1): [0]}))
    assert lines[3:] == [
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        f"Successfully started partition reassignments for {topic}-0,{topic}-1",
    ]

    def verified() -> bool:
        out = _reassign(cluster, "--verify", "--reassignment-json-file", str(plan)).stdout
        return out.splitlines() == [
            "Status of partition reassignment:",
            f"Reassignment of partition {topic}-0 is completed.",
            f"Reassignment of partition {topic}-1 is completed.",
            # nothing moves any more: every throttle is removed, as Kafka's tool does
            "Clearing broker-level throttles on brokers 0,1,2",
            f"Clearing topic-level throttles on topic {topic}",
        ]

    wait_until(verified, 90, what="--verify to report both moves completed", every=0.5)
    for p, replicas in enumerate(placed):
        assert _topic_znode(cluster, topic)["partitions"][str(p)] == replicas
        wait_until(lambda p=p: not _hosts(cluster, 0, topic, p), what="broker 0's replicas gone")
    assert _read_all(cluster, topic, 0) + _read_all(cluster, topic, 1) == [b"x"] * 20

    bad = tmp_path / "bad.json"
    bad.write_text(_format({(topic, 0): [7]}))
    done = _reassign(cluster, "--execute", "--reassignment-json-file", str(bad))
    assert done.returncode == 1
    assert "INVALID_REPLICA_ASSIGNMENT" in done.stderr
    done = _reassign(
        cluster, "--cancel", "--preserve-throttles", "--reassignment-json-file", str(plan)
    )
    assert (done.returncode, done.stdout) == (
        0,
        "None of the specified partition reassignments are active.\n",
    )


def _format(plan: dict) -> str:
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                for (t, p), r in sorted(plan.items())
            ],
        }
    )


LEGACY = "/admin/reassign_partitions"


def _legacy(moves: dict) -> bytes:
    """The znode as tools before KIP-455 write it."""
    partitions = [{"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]
    return orjson.dumps({"version": 1, "partitions": partitions})


def _legacy_asks(cluster) -> dict | None:
    """What the legacy znode asks for now (None: no znode). One read, no exists()
    first: the controller may delete the znode between the two."""
    try:
        data, _ = cluster.zk.client.get(LEGACY)
    except NoNodeError:
        return None
    raw = orjson.loads(data)
    return {(e["topic"], e["partition"]): e["replicas"] for e in raw["partitions"]}


def _produce_to(cluster, topic: str, partition: int, values: list[bytes]) -> None:
    p = producer(cluster, acks="all")
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(30) == 0


def test_a_move_written_to_the_legacy_znode_completes_and_the_znode_is_removed(cluster_factory):
    cluster = cluster_factory()
    topic = "legacy"
    _create(cluster, topic, [[0], [0]])
    values = {p: [b"%d-%d" % (p, i) for i in range(100)] for p in (0, 1)}
    for p, vs in values.items():
        _produce_to(cluster, topic, p, vs)

    cluster.zk.client.create(LEGACY, _legacy({(topic, 0): [1, 2], (topic, 1): [2]}))
    wait_until(
        lambda: _settled(cluster, topic, 0, [1, 2]) and _settled(cluster, topic, 1, [2]),
        90,
        what="both moves to complete",
    )
    wait_until(lambda: _legacy_asks(cluster) is None, what="the controller to delete the znode")
    for p in (0, 1):
        wait_until(lambda p=p: not _hosts(cluster, 0, topic, p), what="broker 0's replicas gone")
        assert _read_all(cluster, topic, p) == values[p]
    assert _listed(_controller_port(cluster))["topics"] == []

    # the znode written again (as the next run of an old tool does) is a new request
    cluster.zk.client.create(LEGACY, _legacy({(topic, 1): [0]}))
    wait_until(lambda: _settled(cluster, topic, 1, [0]), 90, what="the second move")
    wait_until(lambda: _legacy_asks(cluster) is None, what="the znode deleted again")
    assert _read_all(cluster, topic, 1) == values[1]

    # what is not Kafka's JSON is left in place, with a warning saying so (as Kafka does)
    controller = _controller(cluster)
    cluster.zk.client.create(LEGACY, b"{not json")
    wait_until(
        lambda: (
            "ignoring /admin/reassign_partitions: not valid JSON"
            in cluster.brokers[controller].log_text()
        ),
        what="the controller's warning",
    )
    assert cluster.zk.client.get(LEGACY)[0] == b"{not json"
    assert _topic_znode(cluster, topic)["partitions"] == {"0": [1, 2], "1": [0]}


def test_the_legacy_znode_drops_a_refused_move_and_yields_to_the_api(cluster_factory):
    cluster = cluster_factory()
    topic = "legacy-api"
    controller = _controller(cluster)
    source, target = [b for b in range(3) if b != controller]
    _create(cluster, topic, [[source], [source]])
    values = [b"%d" % i for i in range(50)]
    _produce_to(cluster, topic, 0, values)
    port = cluster.brokers[controller].port

    cluster.brokers[target].proc.send_signal(signal.SIGSTOP)  # its move cannot complete
    try:
        # still registered (its session lasts 4 s): the controller starts the move
        cluster.zk.client.create(LEGACY, _legacy({(topic, 0): [target], (topic, 1): [7]}))
        wait_until(
            lambda: _legacy_asks(cluster) == {(topic, 0): [target]},
            what="the refused move (unknown broker 7) dropped from the znode",
        )
        assert _topic_znode(cluster, topic)["adding_replicas"] == {"0": [target]}
        listed = _listed(port)["topics"][0]["partitions"]
        assert [p["partition_index"] for p in listed] == [0]

        # an API request for the same partition wins, and takes it out of the znode
        assert _codes(_alter(port, topic, {0: [controller]})) == {0: ErrorCode.NONE}
        wait_until(lambda: _legacy_asks(cluster) is None, what="the znode deleted")
    finally:
        cluster.brokers[target].proc.send_signal(signal.SIGCONT)
    wait_until(lambda: _settled(cluster, topic, 0, [controller]), 90, what="the API's move")
    assert _topic_znode(cluster, topic)["partitions"]["1"] == [source]
    assert _read_all(cluster, topic, 0) == values


def test_a_new_controller_reads_the_legacy_znode_and_deletes_it_when_done(cluster_factory):
    cluster = cluster_factory()
    topic = "legacy-resumed"
    controller = _controller(cluster)
    source, target = [b for b in range(3) if b != controller]
    _create(cluster, topic, [[source]])
    values = [b"%d" % i for i in range(100)]
    _produce_to(cluster, topic, 0, values)

    cluster.brokers[target].proc.send_signal(signal.SIGSTOP)  # the move cannot complete
    try:
        cluster.zk.client.create(LEGACY, _legacy({(topic, 0): [target]}))
        wait_until(
            lambda: _topic_znode(cluster, topic).get("adding_replicas") == {"0": [target]},
            what="the move started",
        )
        cluster.brokers[controller].kill()
        wait_until(lambda: cluster.zk.controller() not in (-1, controller), what="a new controller")
        assert _legacy_asks(cluster) == {(topic, 0): [target]}  # still pending
    finally:
        cluster.brokers[target].proc.send_signal(signal.SIGCONT)
    cluster.brokers[controller].start()
    wait_until(lambda: _settled(cluster, topic, 0, [target]), 90, what="the move finished")
    wait_until(lambda: _legacy_asks(cluster) is None, what="the successor to delete the znode")
    successor = cluster.brokers[source].log_text()  # the only broker awake: the successor
    assert f"/admin/reassign_partitions asks to move {topic}-0 to [{target}]" in successor
    assert _read_all(cluster, topic) == values
