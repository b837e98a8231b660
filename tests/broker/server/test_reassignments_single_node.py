"""AlterPartitionReassignments and ListPartitionReassignments on one broker process,
answered as a one-broker Kafka answers them: it is the controller, a move to itself
is already done, any other broker is unknown, nothing is ever in progress."""

import pytest

from broker.protocol import ApiKey, ErrorCode
from testkit.kafka import create_topic
from testkit.procs import BrokerProcess
from tests.broker.server.wire import WireClient

TOPIC = "alone"


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    yield b
    b.stop()


def _alter(port: int, partitions: list[tuple[str, int, list[int] | None]]) -> dict:
    topics: dict[str, list[dict]] = {}
    for topic, p, replicas in partitions:
        topics.setdefault(topic, []).append({"partition_index": p, "replicas": replicas})
    body = {
        "timeout_ms": 5000,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    with WireClient(port) as c:
        return c.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)


def _outcomes(answer: dict) -> dict:
    return {
        (t["name"], p["partition_index"]): ErrorCode(p["error_code"])
        for t in answer["responses"]
        for p in t["partitions"]
    }


def test_a_single_broker_answers_as_a_one_broker_kafka(broker):
    create_topic(broker.bootstrap, TOPIC, partitions=2)
    answer = _alter(
        broker.port,
        [
            (TOPIC, 0, [0]),  # where it already is
            (TOPIC, 1, [0, 1]),  # broker 1 does not exist
            (TOPIC, 0, [0]),
            ("nowhere", 0, [0]),
            ("nowhere", 1, None),
        ],
    )
    assert answer["error_code"] == ErrorCode.NONE
    assert _outcomes(answer) == {
        (TOPIC, 0): ErrorCode.NONE,
        (TOPIC, 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nowhere", 1): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
    }
    refused = next(p for p in answer["responses"][0]["partitions"] if p["partition_index"] == 1)
    assert refused["error_message"] == "Unknown broker(s) in replica assignment: 1."

    cancelled = _alter(broker.port, [(TOPIC, 0, None)])
    assert _outcomes(cancelled) == {(TOPIC, 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    with WireClient(broker.port) as c:
        listed = c.request(
            ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 5000, "topics": None}
        )
    assert listed == {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}
