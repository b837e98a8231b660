"""Produce answers that are decided per request or per topic, before any append:
invalid acks, and topics that cannot be auto-created. Against a broker subprocess."""

from broker.protocol import ApiKey, ErrorCode
from tests.broker.server.wire import WireClient, batch, produce_body


def _produce(c: WireClient, acks: int, topics: dict[str, list[int]]) -> dict[str, list[int]]:
    """Produce one batch to each listed partition -> {topic: [error code per partition]}."""
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [
            {
                "name": name,
                "partition_data": [{"index": i, "records": batch(b"v")} for i in partitions],
            }
            for name, partitions in topics.items()
        ],
    }
    r = c.request(ApiKey.PRODUCE, 8, body)
    return {t["name"]: [p["error_code"] for p in t["partition_responses"]] for t in r["responses"]}


def _topic_code(c: WireClient, name: str) -> int:
    """The Metadata error code of `name`, asking without auto-creation."""
    md = c.request(
        ApiKey.METADATA, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": False}
    )
    return md["topics"][0]["error_code"]


def test_an_invalid_topic_name_is_invalid_topic_exception(broker):
    with WireClient(broker.port) as c:
        for name in ("a/b", "..", "x" * 250, "sp ace"):
            codes = _produce(c, 1, {name: [0, 1]})
            assert codes == {name: [ErrorCode.INVALID_TOPIC_EXCEPTION] * 2}, name
        # a legal unknown name is still auto-created and appended to
        assert _produce(c, 1, {"pe-new": [0]}) == {"pe-new": [ErrorCode.NONE]}


def test_an_invalid_topic_name_without_auto_create(broker_factory):
    b = broker_factory(settings={"auto.create.topics.enable": "false"})
    with WireClient(b.port) as c:
        assert _produce(c, 1, {"a/b": [0]}) == {"a/b": [ErrorCode.INVALID_TOPIC_EXCEPTION]}
        assert _produce(c, 1, {"pe-missing": [0]}) == {
            "pe-missing": [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        }


def test_invalid_acks_answers_every_partition_and_creates_nothing(broker):
    with WireClient(broker.port) as c:
        assert _produce(c, 1, {"acks-known": [0]}) == {"acks-known": [ErrorCode.NONE]}
        for acks in (2, -2, 5):
            codes = _produce(c, acks, {"acks-known": [0, 7], "acks-new": [0], "a/b": [0]})
            assert codes == {
                "acks-known": [ErrorCode.INVALID_REQUIRED_ACKS] * 2,
                "acks-new": [ErrorCode.INVALID_REQUIRED_ACKS],
                "a/b": [ErrorCode.INVALID_REQUIRED_ACKS],
            }, acks
        assert _topic_code(c, "acks-new") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # nothing was appended either: the known topic still holds one batch
        r = c.request(ApiKey.PRODUCE, 8, produce_body("acks-known", batch(b"w")))
        assert r["responses"][0]["partition_responses"][0]["base_offset"] == 1
