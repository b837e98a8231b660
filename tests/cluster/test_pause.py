"""A leader paused (SIGSTOP) past its ZooKeeper session timeout, then resumed.

RF 3, min.insync.replicas 2, acks=all, real ZooKeeper and broker processes. While the
leader is frozen its session expires, the controller elects another leader, and the
client moves there. When the old leader wakes up (SIGCONT) it has requests waiting in
its sockets: writes sent to it during the pause. Its session lease ran out while it
was frozen (broker.cluster.lease), so it fences itself before appending any of them:
they are answered NOT_LEADER_OR_FOLLOWER or their connection is closed. Were it not
fenced, none of them could be acknowledged unless the new leader's log had them at
the acknowledged offset (Kafka: the zombie leader cannot grow its high watermark, its
ISR change is refused by the epoch/zkVersion check, and it truncates when it becomes
a follower). Every acknowledged record must be read back at the offset it was
acknowledged with.
"""

import signal
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.protocol import ApiKey, ErrorCode
from tests.broker.server.wire import WireClient, batch, produce_body
from tests.cluster.util import create_topic, producer, wait_until

TOPIC = "paused"
CLOSED = "connection closed"


def read_all(cluster, timeout: float = 60.0) -> dict[int, bytes]:
    c = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "pause-reader", "check.crcs": True}
    )
    try:
        tp = TopicPartition(TOPIC, 0)
        _, high = c.get_watermark_offsets(tp, timeout=timeout, cached=False)
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + timeout
        while len(got) < high and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                if m.error() is None:
                    got[m.offset()] = m.value()
        assert len(got) == high, f"read {len(got)} of {high}"
        return got
    finally:
        c.close()


@pytest.mark.parametrize("pauses", [1, pytest.param(5, marks=pytest.mark.soak)])
def test_paused_leader_is_fenced_and_acks_nothing_it_loses(cluster_factory, pauses):
    cluster = cluster_factory()
    create_topic(cluster, TOPIC)
    session_s = 4.0  # FAST's zookeeper.session.timeout.ms
    acked: dict[int, bytes] = {}
    errors: dict[str, int] = {}
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            errors[err.name()] = errors.get(err.name(), 0) + 1

    def produce_loop():
        p = producer(
            cluster,
            acks="all",
            **{
                "enable.idempotence": True,
                # librdkafka's idempotent producer holds the partition until requests
                # in flight to the frozen leader expire with their messages (seen:
                # ~message.timeout.ms); keep that short so the test stays short.
                "message.timeout.ms": 10000,
                "request.timeout.ms": 3000,
            },
        )
        i = 0
        while not stop.is_set():
            p.produce(TOPIC, b"seq-%d" % i, callback=on_delivery)
            i += 1
            p.poll(0.002)
        p.flush(60)

    thread = threading.Thread(target=produce_loop)
    thread.start()
    zombie_answers = []
    figures = []
    try:
        for _ in range(pauses):
            wait_until(lambda: len(acked) > 200, what="some acknowledged records")
            old = cluster.zk.state(TOPIC)["leader"]
            victim = cluster.brokers[old]
            # A client that only knows the old leader keeps writing to it.
            direct = WireClient(victim.port, timeout=60)
            before = len(acked)
            victim.proc.send_signal(signal.SIGSTOP)
            paused = time.monotonic()
            try:
                corr = []
                for i in range(5):
                    body = produce_body(TOPIC, batch(b"zombie-%d" % i), acks=-1, timeout_ms=8000)
                    corr.append(direct.send(ApiKey.PRODUCE, 8, body))
                wait_until(
                    lambda o=old: cluster.zk.state(TOPIC)["leader"] not in (-1, o),
                    timeout=session_s * 5,
                    what="a new leader while the old one is paused",
                )
                elected_s = time.monotonic() - paused
                wait_until(
                    lambda b=before: len(acked) > b + 100,
                    timeout=45,
                    what="acks from the new leader",
                )
                acked_again_s = time.monotonic() - paused
            finally:
                victim.proc.send_signal(signal.SIGCONT)
            resumed = time.monotonic()
            for _ in corr:
                try:
                    _, body = direct.recv(ApiKey.PRODUCE, 8)
                except ConnectionError:  # fenced on waking up: it drops its clients
                    zombie_answers.append((CLOSED, -1))
                    break
                part = body["responses"][0]["partition_responses"][0]
                zombie_answers.append((part["error_code"], part["base_offset"]))
            direct.close()
            wait_until(
                lambda: len(cluster.zk.state(TOPIC)["isr"]) == 3,
                timeout=60,
                what="the resumed broker back in the ISR",
            )
            figures.append((elected_s, acked_again_s, time.monotonic() - resumed))
            resumed_acks = len(acked)
            wait_until(lambda n=resumed_acks: len(acked) > n + 100, what="acks after the resume")
    finally:
        stop.set()
        thread.join(90)
    assert all(name in ("_MSG_TIMED_OUT", "_TIMED_OUT") for name in errors), errors
    log = read_all(cluster)
    lost = {o: v for o, v in acked.items() if log.get(o) != v}
    assert not lost, (
        f"{len(lost)} acknowledged records not at their offset, e.g. {list(lost.items())[:3]}"
    )
    values = list(log.values())
    assert len(values) == len(set(values)), "duplicates"
    for code, offset in zombie_answers:
        if code == ErrorCode.NONE:
            assert log.get(offset, b"").startswith(b"zombie-"), (
                f"the paused leader acknowledged offset {offset}, which now holds {log.get(offset)}"
            )
        else:
            assert code in (
                CLOSED,
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                ErrorCode.REQUEST_TIMED_OUT,
            ), ErrorCode(code).name
    print(
        f"acked {len(acked)}, client errors {errors}, paused-leader answers "
        f"{sorted({str(c) for c, _ in zombie_answers})}, (new leader, client acked again, "
        f"after the pause; back in ISR after the resume) in s: "
        f"{[tuple(round(x, 2) for x in f) for f in figures]}"
    )
