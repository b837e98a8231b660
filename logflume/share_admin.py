"""Share groups (KIP-932) as `logflume groups` reads and changes them, over the
broker's own codec (broker/protocol/client.BlockingClient): confluent-kafka 2.16 has
no share-group admin calls (its ConsumerGroupType has no SHARE), so the requests
are Kafka's, sent here as kafka-share-groups.sh's admin client sends them:

    ListGroups v5 (types "share") to every broker: the share groups
    FindCoordinator, then ShareGroupDescribe: a group's state and members
    DescribeShareGroupOffsets: its share-partition start offsets
    AlterShareGroupOffsets: new start offsets (an empty group)
    DeleteShareGroupOffsets: a topic's share-partitions gone from the group

A refusal of the whole request raises ShareAdminError with Kafka's error name;
per-partition and per-topic codes are returned. Connections use --command-config's
TLS and SASL (logflume/wire_config.py).
"""

from __future__ import annotations

import dataclasses

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient, Security
from common.hostport import parse_hostport


class ShareAdminError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code


@dataclasses.dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    epoch: int
    assignment: dict[str, list[int]]


@dataclasses.dataclass(frozen=True, slots=True)
class ShareGroupInfo:
    group_id: str
    state: str
    coordinator: int
    members: list[ShareMember]


class ShareAdmin:
    """Blocking; one connection per request's broker, opened per call."""

    def __init__(self, bootstrap: str, security: Security, timeout: float):
        self.bootstrap = [parse_hostport(a, "--bootstrap-server") for a in bootstrap.split(",")]
        self.security = security
        self.timeout = timeout

    def _client(self, host: str | None = None, port: int | None = None) -> BlockingClient:
        """A connection to `host:port`, else to the first bootstrap server that answers
        (one of them may be down: a broker of the cluster failed)."""
        if host is not None and port is not None:
            return BlockingClient(host, port, self.timeout, security=self.security)
        for i, (h, p) in enumerate(self.bootstrap):
            try:
                return BlockingClient(h, p, self.timeout, security=self.security)
            except OSError:
                if i == len(self.bootstrap) - 1:
                    raise
        raise ValueError("--bootstrap-server names no broker")

    def supported(self) -> bool:
        """Whether the bootstrap broker serves the share-group admin APIs (ApiVersions)."""
        with self._client() as client:
            answer = client.request(ApiKey.API_VERSIONS, 2, {})
        served = {k["api_key"] for k in answer["api_keys"]}
        return {ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS} <= served

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group, from each broker (ListGroups lists
        the groups its broker coordinates)."""
        with self._client() as client:
            brokers = client.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]
        found: dict[str, str] = {}
        for b in brokers:
            with self._client(b["host"], b["port"]) as client:
                answer = client.request(
                    ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]}
                )
            _raise(answer["error_code"])
            for g in answer["groups"]:
                found[g["group_id"]] = g["group_state"]
        return sorted(found.items())

    def coordinator(self, group: str) -> tuple[int, str, int]:
        with self._client() as client:
            found = client.request(ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
        _raise(found["error_code"], found.get("error_message"))
        return found["node_id"], found["host"], found["port"]

    def _to_coordinator(self, group: str, api_key: ApiKey, body: dict) -> tuple[int, dict]:
        node, host, port = self.coordinator(group)
        version = 1 if api_key == ApiKey.SHARE_GROUP_DESCRIBE else 0
        with self._client(host, port) as client:
            return node, client.request(api_key, version, body)

    def describe(self, group: str) -> ShareGroupInfo | None:
        """The share group, or None when there is no share group of that id."""
        node, answer = self._to_coordinator(
            group,
            ApiKey.SHARE_GROUP_DESCRIBE,
            {"group_ids": [group], "include_authorized_operations": False},
        )
        g = answer["groups"][0]
        if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        _raise(g["error_code"], g["error_message"])
        members = [
            ShareMember(
                m["member_id"],
                m["client_id"],
                m["client_host"],
                m["member_epoch"],
                {
                    tp["topic_name"]: sorted(tp["partitions"])
                    for tp in m["assignment"]["topic_partitions"]
                },
            )
            for m in g["members"]
        ]
        return ShareGroupInfo(group, g["group_state"], node, members)

    def offsets(
        self, group: str, topics: dict[str, list[int]] | None = None
    ) -> dict[tuple[str, int], tuple[int, int, ErrorCode]]:
        """(topic, partition) -> (start offset, leader epoch, error) of `topics` (None:
        every share-partition the group has)."""
        wanted = None
        if topics is not None:
            wanted = [{"topic_name": t, "partitions": p} for t, p in topics.items()]
        _, answer = self._to_coordinator(
            group,
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            {"groups": [{"group_id": group, "topics": wanted}]},
        )
        g = answer["groups"][0]
        _raise(g["error_code"], g["error_message"])
        return {
            (t["topic_name"], p["partition_index"]): (
                p["start_offset"],
                p["leader_epoch"],
                ErrorCode(p["error_code"]),
            )
            for t in g["topics"]
            for p in t["partitions"]
        }

    def alter(
        self, group: str, offsets: dict[tuple[str, int], int]
    ) -> dict[tuple[str, int], ErrorCode]:
        topics: dict[str, list[dict]] = {}
        for (topic, index), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append({"partition_index": index, "start_offset": offset})
        _, answer = self._to_coordinator(
            group,
            ApiKey.ALTER_SHARE_GROUP_OFFSETS,
            {
                "group_id": group,
                "topics": [{"topic_name": t, "partitions": p} for t, p in topics.items()],
            },
        )
        _raise(answer["error_code"], answer["error_message"])
        return {
            (t["topic_name"], p["partition_index"]): ErrorCode(p["error_code"])
            for t in answer["responses"]
            for p in t["partitions"]
        }

    def delete_offsets(self, group: str, topics: list[str]) -> dict[str, ErrorCode]:
        _, answer = self._to_coordinator(
            group,
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            {"group_id": group, "topics": [{"topic_name": t} for t in topics]},
        )
        _raise(answer["error_code"], answer["error_message"])
        return {t["topic_name"]: ErrorCode(t["error_code"]) for t in answer["responses"]}


def _raise(code: int, message: str | None = None) -> None:
    if code:
        raise ShareAdminError(ErrorCode(code), message)
