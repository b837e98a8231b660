"""The consumer groups' part of the console: every group with its state, members and
committed offsets, read through kafka-python's KafkaAdminClient.

Why kafka-python next to confluent-kafka: librdkafka's ListConsumerGroupOffsets and
confluent-kafka's wrapper take one group per call, so a console refreshing every two
seconds sent one OffsetFetch per group. kafka-python finds every group's coordinator
in one FindCoordinator (v4, KIP-699), then asks each coordinator for all its groups
in one DescribeGroups and one OffsetFetch (v8, KIP-709). The console package may not
use the broker's own codec (ARCHITECTURE.md), and a client of our own would repeat
TLS and SASL.

`admin_config` translates the librdkafka settings every console read shares
(--command-config, translated by common/kafka_properties.py) into kafka-python's
(common/kafka_python_config.py): the security settings it cannot carry over are an
error that names them; librdkafka's tuning settings do not apply and are left out.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from common.kafka_python_config import KafkaPythonConfigError, client_settings
from console.model import lag

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient


class GroupsConfigError(ValueError):
    """Client settings the groups' reader cannot use; the message names them."""


class GroupsReadError(RuntimeError):
    """A failed read of the groups, its message as the page shows it (kafka-python's
    error name and text: "KafkaTimeoutError: Unable to bootstrap ...")."""


def admin_config(conf: dict, timeout: float) -> dict[str, Any]:
    """kafka-python KafkaAdminClient settings for librdkafka settings `conf`."""
    try:
        return client_settings(conf, "logflume-console", timeout)
    except KafkaPythonConfigError as e:
        raise GroupsConfigError(f"the consumer groups are read with kafka-python: {e}") from None


class GroupsReader:
    """Reads every group through one KafkaAdminClient, made on first use and made
    again after a failure (a coordinator that moved, a broker that restarted).
    Called from one thread at a time."""

    def __init__(self, conf: dict, timeout: float):
        self.conf = conf
        self.timeout = timeout
        self._admin: KafkaAdminClient | None = None
        # kafka-python logs every refused connection and retry; the page shows what
        # failed, as librdkafka's chatter is dropped (logflume/client_config.Quiet).
        logging.getLogger("kafka").setLevel(logging.CRITICAL)

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def read(self, high_watermarks: dict[tuple[str, int], int]) -> list[dict]:
        """Every group: its state, members (member and client id, host, assigned
        partitions), and committed offsets with lag per partition (against
        `high_watermarks`). One ListGroups per broker; one DescribeGroups and one
        OffsetFetch per coordinator."""
        try:
            from kafka.errors import KafkaError
        except ImportError:
            raise GroupsReadError(
                "reading the groups needs kafka-python: pip install 'logflume[console]'"
            ) from None
        try:
            return self._read(high_watermarks)
        except KafkaError as e:
            self.close()
            raise GroupsReadError(str(e)) from e
        except Exception:
            self.close()
            raise

    def _read(self, high_watermarks: dict[tuple[str, int], int]) -> list[dict]:
        from kafka.admin import KafkaAdminClient

        if self._admin is None:
            self._admin = KafkaAdminClient(**admin_config(self.conf, self.timeout))
        admin = self._admin
        ids = sorted({g["group_id"] for g in admin.list_groups()})
        if not ids:
            return []
        described = admin.describe_groups(ids)
        offsets = admin.list_group_offsets(ids)
        out = []
        for group_id in ids:
            about = described.get(group_id, {})
            group: dict[str, Any] = {
                "group": group_id,
                "state": about.get("group_state", ""),
                "protocol": about.get("protocol_data") or None,
                "members": [_member(m) for m in about.get("members", [])],
                "partitions": [],
                "lag": None,
            }
            if about.get("error"):
                group["error"] = about["error"]
            total = None
            committed = offsets.get(group_id, {})
            for tp in sorted(committed, key=lambda t: (t.topic, t.partition)):
                high = high_watermarks.get((tp.topic, tp.partition))
                offset = committed[tp].offset
                behind = lag(high, offset) if high is not None else None
                group["partitions"].append(
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "committed": offset,
                        "high": high,
                        "lag": behind,
                    }
                )
                if behind is not None:
                    total = (total or 0) + behind
            group["lag"] = total
            out.append(group)
        return out


def _member(member: dict) -> dict:
    """A member of DescribeGroups as the page shows it; the assignment decoded when
    the group speaks the consumer protocol (else none is shown)."""
    assignment = member.get("member_assignment")
    assigned = []
    if isinstance(assignment, dict):
        for entry in assignment.get("assigned_partitions", []):
            for partition in sorted(entry.get("partitions", [])):
                assigned.append({"topic": entry.get("topic"), "partition": partition})
    host = str(member.get("client_host", ""))
    return {
        "member_id": member.get("member_id"),
        "instance_id": member.get("group_instance_id"),
        "client_id": member.get("client_id"),
        "host": host.removeprefix("/"),
        "assignment": sorted(assigned, key=lambda a: (a["topic"], a["partition"])),
    }
