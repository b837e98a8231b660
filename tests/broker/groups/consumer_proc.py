"""A kafka-python group consumer as its own process, for rebalance tests.

    python -m tests.broker.groups.consumer_proc BOOTSTRAP GROUP TOPIC

Prints its assignment as a JSON list of partitions each time it changes (one line,
flushed); kafka-python's INFO log goes to stderr for failure reports. SIGTERM closes the consumer cleanly (LeaveGroup); SIGKILL does not, so the
broker has to notice through the session timeout.
"""

import json
import logging
import signal
import sys

from kafka import KafkaConsumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
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
    # Learn the topic's partitions before joining. Subscribing first makes the leader
    # assign from empty metadata and rejoin when the metadata arrives; kafka-python
    # 3.0.12 sometimes never delivers the SyncGroup response of that second join to
    # its own coordinator (the broker's answer is on the wire) and the member hangs.
    assert consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    last = None
    while not stop:
        consumer.poll(timeout_ms=100)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != last:
            print(json.dumps(now), flush=True)
            last = now
    consumer.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main()
