"""common/audit_kafka.AuditFollower against a real broker: each `update` reads the
audit topic to its end as it was when the call began (the last stable offset), so it
ends while agents keep publishing and while a transaction is open, and misses nothing
published before it began."""

import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from common.audit import AuditRecord, Bucket, Tally
from common.audit_kafka import AuditFollower
from testkit.procs import wait_until

TOPIC = "logflume-audit"
HOUR_MS = 3_600_000


def record(host: str, count: int) -> AuditRecord:
    minute = int(time.time() * 1000) // 60_000 * 60_000
    return AuditRecord("agent", Bucket(host, "nginx-access", minute), "w1", Tally(count, count))


def create(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)


def follower(bootstrap: str) -> AuditFollower:
    return AuditFollower({"bootstrap.servers": bootstrap}, TOPIC, HOUR_MS)


def test_an_update_ends_while_agents_keep_publishing_and_misses_nothing_before_it(broker):
    create(broker.bootstrap)
    f = follower(broker.bootstrap)
    stop = threading.Event()
    sent: list[int] = []

    def publish():
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        i = 0
        while not stop.is_set():
            rec = record(f"web-{i % 7}", i)
            p.produce(TOPIC, rec.value(), rec.key(), on_delivery=lambda e, m, i=i: sent.append(i))
            p.poll(0)
            i += 1
            time.sleep(0.002)
        p.flush(30)

    writer = threading.Thread(target=publish)
    writer.start()
    try:
        wait_until(lambda: len(sent) >= 50, 30, "acknowledged audit records")
        for _ in range(5):
            before = len(sent)
            last_acked = max(sent[:before])
            assert f.update(timeout_s=120, poll_s=0.1) is True
            counts = {r.bucket.host: r.tally.count for r in f.records()}
            # the last record of every host acknowledged before the call was read
            for i in range(max(0, last_acked - 6), last_acked + 1):
                assert counts[f"web-{i % 7}"] >= i
    finally:
        stop.set()
        writer.join(60)
        f.close()


def test_an_open_transaction_ends_an_update_at_the_last_stable_offset(broker):
    create(broker.bootstrap)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "audit-writer"})
    p.init_transactions(30)
    p.begin_transaction()
    committed = record("web-1", 10)
    p.produce(TOPIC, committed.value(), committed.key(), partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    pending = record("web-2", 20)
    p.produce(TOPIC, pending.value(), pending.key(), partition=0)
    p.flush(30)
    f = follower(broker.bootstrap)
    try:
        assert f.update(timeout_s=120, poll_s=0.1) is True
        assert {r.bucket.host: r.tally.count for r in f.records()} == {"web-1": 10}
        p.commit_transaction(30)
        assert f.update(timeout_s=120, poll_s=0.1) is True
        assert {r.bucket.host: r.tally.count for r in f.records()} == {"web-1": 10, "web-2": 20}
    finally:
        f.close()


def test_no_topic_yet_is_not_an_error(broker):
    f = follower(broker.bootstrap)
    try:
        assert f.update(timeout_s=30, poll_s=0.1) is False
        assert f.records() == []
    finally:
        f.close()
