"""The pure parts of the `/admin/reassign_partitions` watch
(broker/cluster/legacy_reassignment.py): Kafka's legacy JSON read and written back,
what is refused as malformed, and which entries the znode keeps."""

import types

import orjson
import pytest

from broker.cluster.legacy_reassignment import LegacyFormatError, decode, encode, in_flight
from broker.cluster.zk import Moving


def test_the_legacy_json_is_read_as_old_tools_write_it():
    data = orjson.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": "a", "partition": 0, "replicas": [1, 2]},
                {"topic": "b", "partition": 3, "replicas": [2], "log_dirs": ["any"]},
                {"topic": "a", "partition": 0, "replicas": [2, 1]},  # the last one counts
            ],
        }
    )
    assert decode(data) == {("a", 0): [2, 1], ("b", 3): [2]}


def test_it_is_written_back_as_kafka_writes_it():
    wanted = {("a", 0): [1, 2], ("b", 3): [2]}
    assert orjson.loads(encode(wanted)) == {
        "version": 1,
        "partitions": [
            {"topic": "a", "partition": 0, "replicas": [1, 2]},
            {"topic": "b", "partition": 3, "replicas": [2]},
        ],
    }
    assert decode(encode(wanted)) == wanted


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "expected"),
        (b'{"version": 1}', "expected"),
        (b'{"version": 1, "partitions": [{"topic": "a", "partition": "0", "replicas": [1]}]}',
         "each partition needs"),
        (b'{"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [true]}]}',
         "each partition needs"),
        (b'{"version": 1, "partitions": [{"topic": "a", "partition": 0}]}', "each partition"),
    ],
)  # fmt: skip
def test_malformed_data_is_a_clear_error(data, message):
    with pytest.raises(LegacyFormatError, match=message):
        decode(data)


def test_an_entry_stays_only_while_its_partition_moves_towards_it():
    controller = types.SimpleNamespace(
        assignments={"a": [[1, 2, 0], [0]]},
        moving={"a": {0: Moving(adding=(1, 2), removing=(0,))}},
    )
    assert in_flight(controller, ("a", 0), [1, 2])
    assert not in_flight(controller, ("a", 0), [2, 1])  # replaced by another request
    assert not in_flight(controller, ("a", 1), [0])  # done, or never started
    assert not in_flight(controller, ("a", 7), [0])
    assert not in_flight(controller, ("gone", 0), [1])
