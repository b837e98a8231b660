"""Offset arithmetic and option parsing of the data source (pure)."""

import logging

import pytest

from spark_etl.source.options import (
    DataLossError,
    SourceOptions,
    check_start,
    limit_offsets,
    offsets_from_json,
    offsets_to_json,
    parse_offsets_option,
    resolve,
    split_ranges,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_limit_spreads_rows_by_backlog_and_never_passes_target():
    start = {A0: 0, A1: 100, B0: 50}
    target = {A0: 300, A1: 200, B0: 50}
    assert limit_offsets(start, target, 100) == {A0: 75, A1: 125, B0: 50}
    assert limit_offsets(start, target, 10_000) == target
    odd = limit_offsets({A0: 0, A1: 0, B0: 0}, {A0: 1, A1: 1, B0: 1}, 2)
    assert sum(odd.values()) == 2 and all(v <= 1 for v in odd.values())
    # A target below its start (log truncated) stays where it is.
    assert limit_offsets({A0: 0, A1: 50}, {A0: 300, A1: 20}, 100) == {A0: 100, A1: 20}


def test_split_ranges_min_partitions_and_max_records():
    ranges = [(A0, 0, 900), (A1, 0, 100), (B0, 5, 5)]
    pieces = split_ranges(ranges, 5, None)
    assert len(pieces) >= 5 and (B0, 5, 5) not in pieces
    covered = sorted((tp, o) for tp, a, b in pieces for o in range(a, b))
    assert covered == sorted([(A0, o) for o in range(900)] + [(A1, o) for o in range(100)])
    assert all(b - a <= 250 for _, a, b in split_ranges(ranges, None, 250))


def test_offsets_json_round_trip_and_spec_resolution():
    offsets = {A0: 3, A1: 4, B0: 5}
    assert offsets_from_json(offsets_to_json(offsets)) == offsets
    assert offsets_to_json(offsets) == {"a": {"0": 3, "1": 4}, "b": {"0": 5}}
    spec = parse_offsets_option('{"a": {"0": 23, "1": -2}}', "startingOffsets")
    marks = {A0: (10, 50), A1: (7, 9), B0: (0, 4)}
    assert resolve(spec, marks, marks, "latest") == {A0: 23, A1: 7, B0: 4}
    assert resolve("earliest", marks, marks, "latest") == {A0: 10, A1: 7, B0: 0}
    with pytest.raises(ValueError, match="startingOffsets"):
        parse_offsets_option("{bad", "startingOffsets")


def test_options_validation():
    opts = SourceOptions.parse({"bootstrap.servers": "h:1", "subscribe": "x, y"}, streaming=True)
    assert opts.topics == ("x", "y") and opts.starting == "latest" and opts.fail_on_data_loss
    with pytest.raises(ValueError, match="bootstrap"):
        SourceOptions.parse({"subscribe": "x"}, streaming=False)
    with pytest.raises(ValueError, match="batch"):
        SourceOptions.parse({"bootstrap.servers": "h", "startingOffsets": "latest"}, False)
    with pytest.raises(ValueError, match="exactly one"):
        SourceOptions.parse({"bootstrap.servers": "h"}, True).require_subscription()


def test_security_options_are_spark_kafka_names_translated_for_librdkafka():
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="spark" password="spark-secret";'
    )
    opts = SourceOptions.parse(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribe": "t",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": jaas,
            "kafka.ssl.truststore.location": "/etc/ca.pem",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.keystore.location": "/etc/spark.pem",
            "kafka.ssl.keystore.type": "PEM",
            "kafka.ssl.endpoint.identification.algorithm": "",
        },
        streaming=True,
    )
    assert opts.client == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "spark",
        "sasl.password": "spark-secret",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": "/etc/spark.pem",
        "ssl.key.location": "/etc/spark.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert "spark-secret" not in repr(opts)
    plain = {"kafka.sasl.username": "u", "kafka.sasl.password": "p", "kafka.ssl.ca.location": "c"}
    opts = SourceOptions.parse({"bootstrap.servers": "h", **plain}, streaming=True)
    assert opts.client == {
        "bootstrap.servers": "h",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "c",
    }
    with pytest.raises(ValueError, match="kafka.ssl.truststore.location: a JKS trust store"):
        SourceOptions.parse(
            {
                "bootstrap.servers": "h",
                "kafka.ssl.truststore.location": "/x.jks",
                "kafka.ssl.truststore.type": "JKS",
            },
            streaming=True,
        )


def test_check_start_names_partition_and_offsets(caplog):
    with pytest.raises(DataLossError, match=r"topic 'a' partition 1: offsets 3\.\.9 .* is 10"):
        check_start(A1, 3, 10, 20, True, logging.getLogger("t"))
    with caplog.at_level(logging.WARNING):
        assert check_start(A1, 3, 10, 20, False, logging.getLogger("t")) == 10
    assert "failOnDataLoss=false" in caplog.text
    assert check_start(A1, 15, 10, 20, True, logging.getLogger("t")) == 15


def test_emit_records_by_default_or_ranges():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert SourceOptions.parse(base, streaming=True).emit == "records"
    assert SourceOptions.parse({**base, "emit": "Ranges"}, streaming=True).emit == "ranges"
    with pytest.raises(ValueError, match="emit must be one of records, ranges"):
        SourceOptions.parse({**base, "emit": "rows"}, streaming=True)
