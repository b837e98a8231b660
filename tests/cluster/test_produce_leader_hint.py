"""KIP-951 on a three-broker cluster: a Produce v10+ sent to a follower is answered
NOT_LEADER_OR_FOLLOWER with the partition's current leader and epoch and that
leader's endpoint, so the client goes there without a Metadata round trip; v9 gets
the bare error. A broker holding no replica of a partition the cluster knows answers
the same code (Kafka's getPartitionOrError), to Fetch and ListOffsets too."""

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient
from tests.broker.server.wire import batch, fetch_body, produce_body
from tests.cluster.util import create_topic


def test_a_follower_names_the_leader_to_produce_v10_and_later(cluster_factory):
    cluster = cluster_factory(3)
    create_topic(cluster, "hinted", partitions=1)
    state = cluster.zk.state("hinted")
    follower = next(i for i in cluster.brokers if i != state["leader"])
    leader_host, leader_port = cluster.brokers[state["leader"]].bootstrap.split(":")
    host, port = cluster.brokers[follower].bootstrap.split(":")
    with BlockingClient(host, int(port)) as c:
        for version in (10, 12):
            resp = c.request(ApiKey.PRODUCE, version, produce_body("hinted", batch(b"x")))
            part = resp["responses"][0]["partition_responses"][0]
            assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert part["current_leader"] == {
                "leader_id": state["leader"],
                "leader_epoch": state["leader_epoch"],
            }
            assert resp["node_endpoints"] == [
                {
                    "node_id": state["leader"],
                    "host": leader_host,
                    "port": int(leader_port),
                    "rack": None,
                }
            ]
        old = c.request(ApiKey.PRODUCE, 9, produce_body("hinted", batch(b"x")))
        assert old["responses"][0]["partition_responses"][0]["error_code"] == (
            ErrorCode.NOT_LEADER_OR_FOLLOWER
        )


def _list_offsets(topic: str, partition: int) -> dict:
    request = {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [request]}],
    }


def test_a_broker_without_a_replica_answers_not_leader(cluster_factory):
    cluster = cluster_factory(3)
    create_topic(cluster, "placed", partitions=1, rf=1)
    (holder,) = cluster.zk.assignment("placed", 0)
    other = next(i for i in cluster.brokers if i != holder)
    host, port = cluster.brokers[other].bootstrap.split(":")
    with BlockingClient(host, int(port)) as c:

        def codes(partition: int) -> tuple[int, int, int]:
            produced = c.request(
                ApiKey.PRODUCE, 9, produce_body("placed", batch(b"x"), partition=partition)
            )
            fetched = c.request(ApiKey.FETCH, 12, fetch_body("placed", partition=partition))
            listed = c.request(ApiKey.LIST_OFFSETS, 6, _list_offsets("placed", partition))
            return (
                produced["responses"][0]["partition_responses"][0]["error_code"],
                fetched["responses"][0]["partitions"][0]["error_code"],
                listed["topics"][0]["partitions"][0]["error_code"],
            )

        assert codes(0) == (ErrorCode.NOT_LEADER_OR_FOLLOWER,) * 3
        assert codes(5) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,) * 3
