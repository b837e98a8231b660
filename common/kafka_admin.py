"""Topics a logflume client writes besides its data topics (positions, audit): created when
missing, by the agent's kafka sink and the Spark jobs."""

from __future__ import annotations

READ_TIMEOUT_S = 30.0  # most time for a metadata request or a topic's creation


def ensure_topic(admin_conf: dict, topic: str, partitions: int, config: dict, log) -> None:
    """Create `topic` with `config` unless it exists (blocking), replicated on up to 3
    brokers."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(admin_conf)
    metadata = admin.list_topics(timeout=READ_TIMEOUT_S)
    if topic in metadata.topics:
        return
    new = NewTopic(
        topic,
        num_partitions=partitions,
        replication_factor=min(3, max(1, len(metadata.brokers))),
        config=config,
    )
    try:
        admin.create_topics([new], request_timeout=READ_TIMEOUT_S)[topic].result(READ_TIMEOUT_S)
        log.info("created topic %s", topic)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
