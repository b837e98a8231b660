"""A kafka-python group consumer as its own process, for rebalance tests.

    python -m tests.broker.groups.consumer_proc BOOTSTRAP GROUP TOPIC[,TOPIC...]

Prints its assignment as a JSON list of "topic:partition" strings each time it
changes (one line, flushed); kafka-python's INFO log goes to stderr for failure
reports. A line "subscribe T1,T2" on stdin changes the subscription. SIGTERM closes
the consumer cleanly (LeaveGroup); SIGKILL does not, so the broker has to notice
through the session timeout.
"""

import json
import logging
import queue
import signal
import sys
import threading

from kafka import KafkaConsumer
from kafka.coordinator.consumer import ConsumerCoordinator


def latch_started_joins() -> None:
    """Work around a kafka-python 3.0.12 bug: the member never finishes a join it
    started on its own (the leader rejoining because its metadata snapshot changed).
    `ConsumerCoordinator.poll` only drives a join while `need_rejoin()` is true
    (kafka/coordinator/consumer.py ~408), but performing the new assignment makes
    `need_rejoin()` false part-way through (~473, ~605), so the finished
    JoinGroup/SyncGroup in `_join_task` (kafka/coordinator/base.py ~480-551) is never
    collected: heartbeats stay disabled and the member stalls while the broker expires
    it. The Java client latches such a join (`joinFuture != null`); so does this."""
    need_rejoin = ConsumerCoordinator.need_rejoin

    def latched(self):
        return self._join_task is not None or need_rejoin(self)

    ConsumerCoordinator.need_rejoin = latched


def main() -> None:
    bootstrap, group, topics = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    latch_started_joins()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        auto_offset_reset="earliest",
    )
    # Fetch metadata after subscribing, so that the first join already knows the
    # topics' partitions (the coordinator's metadata snapshot is only refreshed by a
    # metadata response that arrives after subscribe()) and the leader has no reason
    # to start a second join of its own.
    consumer.subscribe(topics)
    assert set(topics) <= consumer.topics()
    commands: queue.Queue = queue.Queue()
    threading.Thread(
        target=lambda: [commands.put(x.split()) for x in sys.stdin], daemon=True
    ).start()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    last = None
    while not stop:
        while not commands.empty():
            verb, arg = commands.get()
            assert verb == "subscribe", verb
            consumer.subscribe(arg.split(","))
        consumer.poll(timeout_ms=100)
        now = sorted(f"{tp.topic}:{tp.partition}" for tp in consumer.assignment())
        if now != last:
            print(json.dumps(now), flush=True)
            last = now
    consumer.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main()
