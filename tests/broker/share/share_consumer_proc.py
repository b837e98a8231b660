"""A confluent-kafka share consumer in a process of its own, for the tests that kill
one mid-batch.

    python -m tests.broker.share.share_consumer_proc BOOTSTRAP GROUP TOPIC

Explicit acknowledgement mode. Records whose value starts with b"warm" (what a test
produces until the share-partition exists) are accepted and reported as a line
"warm"; the first batch with other records is reported as "OFFSET DELIVERY_COUNT"
lines (flushed) and never acknowledged: the consumer stops polling and waits to be
killed, so what it holds only comes back through the lock timeout.
"""

import sys

from confluent_kafka import AcknowledgeType, ShareConsumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    while True:
        held = False
        for message in consumer.poll(1.0):
            if message.error() is not None:
                continue
            if message.value().startswith(b"warm"):
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                print("warm", flush=True)
            else:
                print(message.offset(), message.delivery_count(), flush=True)
                held = True
        if held:
            break
    sys.stdin.read()  # until killed


if __name__ == "__main__":
    main()
