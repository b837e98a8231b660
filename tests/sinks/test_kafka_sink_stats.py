"""The Kafka sink's gauges from librdkafka statistics, fed documents shaped as
librdkafka 2.x writes them (the live path is tested against a broker in
test_kafka_sink.py)."""

import logging

import orjson

from agent.metrics import Registry
from sinks.kafka.stats import ProducerStats


def broker(nodeid, source, state, rtt_avg=0, rtt_cnt=0, outbuf=0):
    return {
        "nodeid": nodeid,
        "source": source,
        "state": state,
        "rtt": {"avg": rtt_avg, "cnt": rtt_cnt},
        "outbuf_msg_cnt": outbuf,
    }


def document(msg_cnt, msg_size, brokers):
    return orjson.dumps(
        {"name": "rdkafka#producer-1", "msg_cnt": msg_cnt, "msg_size": msg_size, "brokers": brokers}
    )


def test_queue_and_per_broker_gauges():
    r = Registry()
    stats = ProducerStats(r, "k", logging.getLogger("k"))
    stats.on_stats(
        document(
            12,
            3400,
            {
                "b:9092/1": broker(1, "learned", "UP", 7500, 3, 4),
                "b:9093/2": broker(2, "learned", "CONNECT"),
                "b:9092/bootstrap": broker(-1, "configured", "UP"),
                "GroupCoordinator": broker(-1, "logical", "UP"),
                ":0/internal": broker(-1, "internal", "UP"),
            },
        )
    )
    assert r.value("logflume_agent_kafka_queue_messages", component="k") == 12
    assert r.value("logflume_agent_kafka_queue_bytes", component="k") == 3400
    assert r.value("logflume_agent_kafka_broker_up", component="k", broker="b:9092/1") == 1
    assert r.value("logflume_agent_kafka_broker_up", component="k", broker="b:9093/2") == 0
    assert (
        r.value("logflume_agent_kafka_broker_rtt_seconds", component="k", broker="b:9092/1")
        == 0.0075
    )
    assert (
        r.value("logflume_agent_kafka_broker_outbuf_messages", component="k", broker="b:9092/1")
        == 4
    )
    for placeholder in ("b:9092/bootstrap", "GroupCoordinator", ":0/internal"):
        assert r.value("logflume_agent_kafka_broker_up", component="k", broker=placeholder) is None

    # all connections lost: librdkafka drops its learned brokers and bootstraps again;
    # an interval without requests keeps the last round-trip time
    stats.on_stats(document(12, 3400, {"b:9092/bootstrap": broker(-1, "configured", "INIT")}))
    assert r.value("logflume_agent_kafka_broker_up", component="k", broker="b:9092/1") == 0
    assert (
        r.value("logflume_agent_kafka_broker_rtt_seconds", component="k", broker="b:9092/1")
        == 0.0075
    )


def test_a_document_not_understood_is_logged_not_raised(caplog):
    r = Registry()
    stats = ProducerStats(r, "k", logging.getLogger("k"))
    with caplog.at_level(logging.WARNING):
        stats.on_stats("{not json")
        stats.on_stats(orjson.dumps({"msg_cnt": 1}))
    assert caplog.text.count("producer statistics not understood") == 2
