"""What the flexible versions add, answered by a real broker over its own codec:
topic ids (Metadata, CreateTopics, DeleteTopics), batched coordinator lookups and
offset fetches, group protocol fields, the state filter and diverging epochs."""

import uuid
from types import SimpleNamespace

from broker.log.epoch import LeaderEpochCache
from broker.protocol import ApiKey, ErrorCode
from broker.server.handlers.fetch import _divergence
from tests.broker.server.test_requests import create
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body


def metadata(c: WireClient, topics) -> dict:
    return c.request(
        ApiKey.METADATA,
        12,
        {
            "topics": topics,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )


def commit(c: WireClient, group: str, topic: str, offset: int) -> dict:
    """OffsetCommit v8 of `offset` for partition 0 of `topic`, outside any generation,
    after finding the coordinator as a client does (that creates `__consumer_offsets`:
    without it a fresh broker answers NOT_COORDINATOR, as Kafka)."""
    found = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
    assert found["coordinators"][0]["error_code"] == ErrorCode.NONE
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    return c.request(ApiKey.OFFSET_COMMIT, 8, body)


def test_topic_ids_in_create_metadata_and_delete(module_broker):
    with WireClient(module_broker.port) as c:
        created = create(c, "ids-a", 2, configs={"retention.ms": "60000"}, version=7)
        assert created["error_code"] == ErrorCode.NONE
        topic_id = created["topic_id"]
        assert topic_id != uuid.UUID(int=0)
        assert (created["num_partitions"], created["replication_factor"]) == (2, 1)
        configs = {e["name"]: e for e in created["configs"]}
        assert configs["retention.ms"]["value"] == "60000"
        assert configs["retention.ms"]["config_source"] == 1  # the topic's own setting
        assert configs["segment.bytes"]["config_source"] == 5  # a default

        (by_name,) = metadata(c, [{"name": "ids-a"}])["topics"]
        assert by_name["topic_id"] == topic_id and len(by_name["partitions"]) == 2
        (by_id,) = metadata(c, [{"topic_id": topic_id, "name": None}])["topics"]
        assert by_id["name"] == "ids-a" and by_id["error_code"] == ErrorCode.NONE
        unknown = uuid.uuid4()
        (missing,) = metadata(c, [{"topic_id": unknown, "name": None}])["topics"]
        assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        assert missing["name"] is None and missing["topic_id"] == unknown

        deleted = c.request(
            ApiKey.DELETE_TOPICS,
            6,
            {"topics": [{"name": None, "topic_id": topic_id}], "timeout_ms": 5000},
        )["responses"]
        assert [(r["name"], r["error_code"]) for r in deleted] == [("ids-a", ErrorCode.NONE)]
        (gone,) = metadata(c, [{"topic_id": topic_id, "name": None}])["topics"]
        assert gone["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID


def test_find_coordinator_v4_answers_each_key(module_broker):
    with WireClient(module_broker.port) as c:
        answer = c.request(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g-a", "g-b"]}
        )
        coordinators = answer["coordinators"]
        assert [k["key"] for k in coordinators] == ["g-a", "g-b"]
        assert {(k["error_code"], k["port"]) for k in coordinators} == {
            (ErrorCode.NONE, module_broker.port)
        }
        txn = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["t"]})
        assert txn["coordinators"][0]["error_code"] == ErrorCode.NONE
        assert txn["coordinators"][0]["port"] == module_broker.port


def test_offset_fetch_v8_answers_each_group(module_broker):
    with WireClient(module_broker.port) as c:
        assert create(c, "of-a", 1)["error_code"] == ErrorCode.NONE
        committed = commit(c, "of-g1", "of-a", 42)
        assert committed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
        wanted = [{"name": "of-a", "partition_indexes": [0]}]
        groups = c.request(
            ApiKey.OFFSET_FETCH,
            8,
            {
                "groups": [
                    {"group_id": "of-g1", "topics": wanted},
                    {"group_id": "of-g2", "topics": wanted},
                ],
                "require_stable": True,
            },
        )["groups"]
        offsets = {
            g["group_id"]: g["topics"][0]["partitions"][0]["committed_offset"] for g in groups
        }
        assert offsets == {"of-g1": 42, "of-g2": -1}


def test_list_groups_v4_filters_by_state(module_broker):
    with WireClient(module_broker.port) as c:
        assert create(c, "lg-a", 1)["error_code"] == ErrorCode.NONE
        commit(c, "lg-empty", "lg-a", 1)
        empty = c.request(ApiKey.LIST_GROUPS, 4, {"states_filter": ["empty"]})["groups"]
        assert "lg-empty" in {g["group_id"] for g in empty}
        assert {g["group_state"] for g in empty} == {"Empty"}
        stable = c.request(ApiKey.LIST_GROUPS, 4, {"states_filter": ["Stable"]})["groups"]
        assert "lg-empty" not in {g["group_id"] for g in stable}


def test_a_consumer_fetch_v12_reads_without_divergence(module_broker):
    with WireClient(module_broker.port) as c:
        assert create(c, "fv-a", 1)["error_code"] == ErrorCode.NONE
        c.request(ApiKey.PRODUCE, 9, produce_body("fv-a", batch(b"one", b"two")))
        body = fetch_body("fv-a") | {"session_id": 0, "session_epoch": -1, "rack_id": ""}
        body["topics"][0]["partitions"][0] |= {"current_leader_epoch": -1, "last_fetched_epoch": -1}
        part = c.request(ApiKey.FETCH, 12, body)["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.NONE and part["high_watermark"] == 2
        assert part["diverging_epoch"] == {"epoch": -1, "end_offset": -1}
        assert len(bytes(part["records"])) > 0


def test_fetch_v13_to_v17_name_topics_by_id(module_broker):
    """v13+ names topics by id (an unknown id: UNKNOWN_TOPIC_ID, answered by id);
    v15+ carries the replica id in replica_state; v17's directory id is ignored."""
    with WireClient(module_broker.port) as c:
        assert create(c, "fv-ids", 1)["error_code"] == ErrorCode.NONE
        c.request(ApiKey.PRODUCE, 9, produce_body("fv-ids", batch(b"by", b"id")))
        topic_id = metadata(c, [{"topic_id": uuid.UUID(int=0), "name": "fv-ids"}])["topics"][0][
            "topic_id"
        ]
        stranger = uuid.uuid4()
        for version in (13, 15, 17):
            body = fetch_body("fv-ids") | {"session_id": 0, "session_epoch": -1, "rack_id": ""}
            body["replica_state"] = {"replica_id": -1, "replica_epoch": -1}
            known = body["topics"][0] | {"topic_id": topic_id}
            body["topics"] = [known, {"topic_id": stranger, "partitions": known["partitions"]}]
            answer = c.request(ApiKey.FETCH, version, body)["responses"]
            assert [t["topic_id"] for t in answer] == [topic_id, stranger]
            part, unknown = answer[0]["partitions"][0], answer[1]["partitions"][0]
            assert part["error_code"] == ErrorCode.NONE and part["high_watermark"] == 2
            assert len(bytes(part["records"])) > 0
            assert unknown["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID


def test_divergence_of_a_follower_by_its_last_fetched_epoch(tmp_path):
    """Leader log: epoch 0 at offsets 0-9, epoch 2 from 10, end 15."""
    cache = LeaderEpochCache(tmp_path, lambda: 15)
    cache.assign(0, 0)
    cache.assign(2, 10)
    partition = SimpleNamespace(log=SimpleNamespace(leader_epoch_cache=cache))

    def diverges(last_epoch: int, fetch_offset: int):
        return _divergence(
            partition, {"last_fetched_epoch": last_epoch, "fetch_offset": fetch_offset}
        )

    assert diverges(-1, 12) is None  # a consumer, or an old follower
    assert diverges(2, 12) is None  # same epoch, within it
    assert diverges(0, 8) is None  # an older epoch, before its end
    assert diverges(0, 12) == {"epoch": 0, "end_offset": 10}  # epoch 0 ended at 10 here
    assert diverges(1, 10) == {"epoch": 0, "end_offset": 10}  # epoch 1 never led here
    assert diverges(3, 15) == {"epoch": -1, "end_offset": -1}  # an epoch unknown here
