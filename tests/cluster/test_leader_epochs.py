"""Leader epochs as clients see them (KIP-320): Metadata v7+ names each partition's
epoch, and Fetch, ListOffsets and OffsetForLeaderEpoch answer a client whose epoch is
older than the leader's with FENCED_LEADER_EPOCH (its metadata is stale) and one whose
epoch is newer with UNKNOWN_LEADER_EPOCH (this broker has not heard of it yet), as
Kafka does. Real ZooKeeper and brokers; the leader is SIGKILLed so that the epoch moves.
"""

from broker.protocol import ApiKey, ErrorCode
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body
from tests.cluster.util import create_topic, wait_until

TOPIC = "epochs"


def _metadata_epoch(port: int) -> tuple[int, int]:
    with WireClient(port) as c:
        body = {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        resp = c.request(ApiKey.METADATA, 12, body)
    (topic,) = [t for t in resp["topics"] if t["name"] == TOPIC]
    part = topic["partitions"][0]
    return part["leader_id"], part["leader_epoch"]


def _answers(port: int, epoch: int) -> dict[str, ErrorCode]:
    """The error each epoch-checking API gives a client that believes `epoch`."""
    with WireClient(port) as c:
        fetch = fetch_body(TOPIC)
        fetch["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
        fetched = c.request(ApiKey.FETCH, 12, fetch)
        listed = c.request(
            ApiKey.LIST_OFFSETS,
            6,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}
                        ],
                    }
                ],
            },
        )
        ended = c.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            4,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": TOPIC,
                        "partitions": [
                            {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": 0}
                        ],
                    }
                ],
            },
        )
    return {
        "fetch": ErrorCode(fetched["responses"][0]["partitions"][0]["error_code"]),
        "list_offsets": ErrorCode(listed["topics"][0]["partitions"][0]["error_code"]),
        "offset_for_leader_epoch": ErrorCode(ended["topics"][0]["partitions"][0]["error_code"]),
    }


def test_clients_with_a_stale_or_future_epoch_are_told_so(cluster_factory):
    cluster = cluster_factory()
    create_topic(cluster, TOPIC)
    first = cluster.zk.state(TOPIC)
    leader, epoch = first["leader"], first["leader_epoch"]
    port = cluster.brokers[leader].port
    with WireClient(port) as c:
        resp = c.request(ApiKey.PRODUCE, 8, produce_body(TOPIC, batch(b"a"), acks=-1))
        assert resp["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE
    for b in cluster.brokers.values():
        assert _metadata_epoch(b.port) == (leader, epoch)
    assert set(_answers(port, epoch).values()) == {ErrorCode.NONE}

    cluster.brokers[leader].kill()
    wait_until(
        lambda: (
            (s := cluster.zk.state(TOPIC))["leader"] not in (-1, leader)
            and s["leader_epoch"] > epoch
        ),
        what="a new leader in a newer epoch",
    )
    now = cluster.zk.state(TOPIC)
    new_port = cluster.brokers[now["leader"]].port
    wait_until(
        lambda: _metadata_epoch(new_port) == (now["leader"], now["leader_epoch"]),
        what="the new leader's Metadata to name it with its epoch",
    )
    everything = set(_answers(new_port, now["leader_epoch"]).values())
    assert everything == {ErrorCode.NONE}
    assert set(_answers(new_port, epoch).values()) == {ErrorCode.FENCED_LEADER_EPOCH}
    future = set(_answers(new_port, now["leader_epoch"] + 1).values())
    assert future == {ErrorCode.UNKNOWN_LEADER_EPOCH}
