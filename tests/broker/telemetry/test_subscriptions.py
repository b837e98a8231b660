"""Client-metrics subscriptions (pure): Kafka's checks and errors, matching a client
to them, the metrics and interval it is given, its subscription id."""

import uuid

import pytest

from broker.config_ops import APPEND, DELETE, SET, SUBTRACT, split_list
from broker.protocol import ErrorCode
from broker.telemetry.subscriptions import (
    DEFAULT_INTERVAL_MS,
    ClientMetricsConfigError,
    apply_changes,
    parse,
    select,
)

ONE = uuid.UUID(int=1 << 64)
TWO = uuid.UUID(int=2 << 64)
PRODUCER = {
    "client_instance_id": str(ONE),
    "client_id": "nginx-sink-3",
    "client_software_name": "confluent-kafka-python",
    "client_software_version": "2.16.1-rdkafka-2.16.0",
    "client_source_address": "10.1.2.3",
    "client_source_port": "53422",
}


def test_a_subscription_is_parsed_with_kafkas_defaults():
    sub = parse("s", {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer."})
    assert sub.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.")
    assert sub.interval_ms == DEFAULT_INTERVAL_MS == 300000
    assert sub.match == ()
    assert parse("s", {}).metrics == ()


@pytest.mark.parametrize(
    ("name", "props", "code", "message"),
    [
        ("", {}, ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
        ("s", {"colour": "red"}, ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: colour"),
        ("s", {"interval.ms": "99"}, ErrorCode.INVALID_REQUEST, "interval must be between 100 and 3600000"),
        ("s", {"interval.ms": "3600001"}, ErrorCode.INVALID_REQUEST, "Invalid value 3600001"),
        ("s", {"interval.ms": "often"}, ErrorCode.INVALID_CONFIG, "Not a number of type INT"),
        ("s", {"match": "client_id"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id"),
        ("s", {"match": "client_id=a=b"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern"),
        ("s", {"match": "client_colour=red"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern"),
        ("s", {"match": "client_id=("}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern"),
    ],
)  # fmt: skip
def test_what_kafka_refuses_is_refused_with_its_error(name, props, code, message):
    with pytest.raises(ClientMetricsConfigError) as e:
        parse(name, props)
    assert e.value.code == code and message in str(e.value)


def test_the_interval_bounds_are_inclusive():
    assert parse("s", {"interval.ms": "100"}).interval_ms == 100
    assert parse("s", {"interval.ms": "3600000"}).interval_ms == 3600000


def test_matching_is_a_full_regex_match_of_every_selector():
    sub = parse("s", {"match": "client_id=nginx-sink-.*, client_software_name=confluent.*"})
    assert sub.matches(PRODUCER)
    assert not sub.matches(PRODUCER | {"client_id": "xnginx-sink-3"})  # full match only
    assert not sub.matches(PRODUCER | {"client_software_name": "apache-kafka-java"})
    assert not sub.matches(PRODUCER | {"client_software_name": None})  # unknown: no match
    assert parse("s", {"match": "client_source_port=5342."}).matches(PRODUCER)
    assert parse("s", {}).matches({})  # no pattern: every client


def test_a_client_gets_the_union_of_its_subscriptions_and_the_smallest_interval():
    subs = [
        parse("producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000"}),
        parse("latency", {"metrics": "org.apache.kafka.producer.node.", "interval.ms": "1000"}),
        parse("java", {"metrics": "*", "interval.ms": "200", "match": "client_software_name=java"}),
    ]
    sel = select(subs, PRODUCER, ONE)
    assert sel.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.producer.node.")
    assert sel.interval_ms == 1000
    nothing = select(subs[2:], PRODUCER, ONE)
    assert nothing.metrics == () and nothing.interval_ms == DEFAULT_INTERVAL_MS


def test_all_metrics_is_sent_as_the_star_alone():
    subs = [parse("a", {"metrics": "org.apache.kafka.producer."}), parse("b", {"metrics": "*"})]
    assert select(subs, PRODUCER, ONE).metrics == ("*",)


def test_the_subscription_id_is_the_same_everywhere_and_changes_with_what_is_asked():
    sub = parse("s", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
    first = select([sub], PRODUCER, ONE).subscription_id
    assert select([sub], PRODUCER, ONE).subscription_id == first  # any broker computes it
    assert -(1 << 31) <= first < 1 << 31
    assert select([sub], PRODUCER, TWO).subscription_id != first
    faster = parse("s", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"})
    assert select([faster], PRODUCER, ONE).subscription_id != first
    more = parse("s", {"metrics": "org.apache.kafka."})
    assert select([more], PRODUCER, ONE).subscription_id != first


def test_incremental_changes_set_delete_append_and_subtract():
    current = {"metrics": "a.,b.", "interval.ms": "1000"}
    out = apply_changes(
        current,
        [
            {"name": "metrics", "config_operation": APPEND, "value": "c.,a."},
            {"name": "interval.ms", "config_operation": DELETE, "value": None},
            {"name": "match", "config_operation": SET, "value": "client_id=x"},
        ],
        incremental=True,
    )
    assert out == {"metrics": "a.,b.,c.", "match": "client_id=x"}
    out = apply_changes(
        out, [{"name": "metrics", "config_operation": SUBTRACT, "value": "a."}], True
    )
    assert out["metrics"] == "b.,c."
    assert current == {"metrics": "a.,b.", "interval.ms": "1000"}  # not changed in place


def test_the_legacy_alter_replaces_every_key():
    out = apply_changes(
        {"metrics": "a.", "interval.ms": "1000"}, [{"name": "metrics", "value": "b."}], False
    )
    assert out == {"metrics": "b."}


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"name": "interval.ms", "config_operation": APPEND, "value": "5"}, ErrorCode.INVALID_CONFIG),
        ({"name": "metrics", "config_operation": 9, "value": "a"}, ErrorCode.INVALID_REQUEST),
        ({"name": "metrics", "config_operation": SET, "value": None}, ErrorCode.INVALID_REQUEST),
    ],
)  # fmt: skip
def test_bad_changes_are_refused(change, code):
    with pytest.raises(ClientMetricsConfigError) as e:
        apply_changes({}, [change], incremental=True)
    assert e.value.code == code


def test_lists_split_as_kafka_splits_them():
    assert split_list("") == [] and split_list("  ") == []
    assert split_list(" a , b,c ") == ["a", "b", "c"]
    assert split_list("a,,b") == ["a", "", "b"]
