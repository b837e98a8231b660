"""Kafka's znode paths and change notifications for ACLs (pure)."""

import orjson

from broker.cluster.zk_acls import (
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    acl_path,
    decode_change,
    encode_change,
)
from broker.security.acl import PatternType, Resource, ResourceType


def test_paths_and_change_notifications_round_trip():
    literal = Resource(ResourceType.TRANSACTIONAL_ID, "tx-1")
    prefixed = Resource(ResourceType.TOPIC, "web-", PatternType.PREFIXED)
    assert acl_path(literal) == "/kafka-acl/TransactionalId/tx-1"
    assert acl_path(prefixed) == "/kafka-acl-extended/prefixed/Topic/web-"
    assert encode_change(literal) == (LITERAL_CHANGES, b"TransactionalId:tx-1")
    directory, data = encode_change(prefixed)
    assert directory == EXTENDED_CHANGES
    assert orjson.loads(data) == {
        "version": 1,
        "resourceType": "Topic",
        "name": "web-",
        "patternType": "Prefixed",
    }
    for r in (literal, prefixed, Resource(ResourceType.GROUP, "a:b")):
        assert decode_change(*encode_change(r)) == r
