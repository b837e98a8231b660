"""The topic names logflume writes, and the rules that read them."""

from common.topic_names import (
    CONSUMER_OFFSETS,
    INTERNAL_TOPICS,
    POSITIONS_TOPIC,
    TRANSACTION_STATE,
    dead_letter_topic,
    is_internal,
)


def test_kafka_internal_topics_are_the_coordinators_two():
    assert INTERNAL_TOPICS == {"__consumer_offsets", "__transaction_state", "__share_group_state"}
    assert is_internal(CONSUMER_OFFSETS) and is_internal(TRANSACTION_STATE)
    assert not is_internal("__other") and not is_internal(POSITIONS_TOPIC)


def test_the_agent_topics_are_ordinary_ones():
    assert POSITIONS_TOPIC == "logflume-positions"
    assert dead_letter_topic("nginx-access") == "nginx-access.dlq"
