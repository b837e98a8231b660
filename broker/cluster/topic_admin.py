"""TopicAdmin: the topic writes clients ask for, checked the way Kafka checks them.

CreateTopics and auto-creation (names, partition counts, replication factors and
configs; replicas assigned over the cluster view's live brokers, or given by the
client and checked against its registered ones, on a single node as in a
cluster), DeleteTopics,
AlterConfigs and IncrementalAlterConfigs (`with_configs`: the whole new override
set), CreatePartitions (`with_partitions`, with client-given replica lists or
assigned ones). A checked write goes to the cluster view (broker.cluster.view),
which applies it (a single node: the replica manager's `create_local`,
`delete_local`, `alter_local`) or writes it to ZooKeeper for every broker to apply
(a cluster). Kafka keeps these checks in its AdminManager. Raises TopicError with
Kafka's codes and messages.

Assigned replicas also go to distinct hosts (broker/cluster/assignment.py); with
fewer hosts than the replication factor the topic is created all the same, as Kafka
would, and a warning says which hosts are shared.

Owned by the BrokerCore (`core.topic_admin`); event-loop only.
"""

from __future__ import annotations

import dataclasses
import logging

from broker.cluster.assignment import (
    AssignmentError,
    InvalidAssignment,
    assign_replicas,
    broker_hosts,
    check_new_assignments,
    check_topic_assignment,
    first_broker,
    host_shortfall,
)
from broker.cluster.metadata_store import TopicMeta
from broker.cluster.names import InvalidTopicName, validate_topic_name
from broker.cluster.replica_manager import ReplicaManager, TopicError
from broker.config import BrokerConfig
from broker.log.config import TOPIC_CONFIG_NAMES
from broker.protocol.errors import ErrorCode

MAX_PARTITIONS = 10_000

log = logging.getLogger(__name__)


class TopicAdmin:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager):
        self.config = config
        self.replicas = replicas

    def check_new_name(self, name: str) -> None:
        """TopicError unless `name` is a valid name no topic has."""
        try:
            validate_topic_name(name)
        except InvalidTopicName as e:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
        if name in self.replicas.store:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")

    def validate_new_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str | None],
    ) -> tuple[int, int, dict[str, str]]:
        """Check a CreateTopics entry; returns (partitions, rf, overrides) or raises TopicError."""
        self.check_new_name(name)
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if not 1 <= num_partitions <= MAX_PARTITIONS:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, f"Number of partitions must be 1..{MAX_PARTITIONS}."
            )
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        available = len(self.replicas.cluster.brokers)
        if not 1 <= replication_factor <= available:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {replication_factor} larger than available brokers: "
                f"{available}.",
            )
        overrides: dict[str, str] = {}
        for key, value in configs.items():
            if value is None:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"{key}: null value")
            overrides[key] = value
        try:
            self.replicas.log_config(overrides)
        except ValueError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid config: {e}") from None
        return num_partitions, replication_factor, overrides

    def plan_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
        given: list[tuple[int, list[int]]] | None = None,
    ) -> TopicMeta:
        """A new topic checked and its replicas assigned, not yet created (TopicError).
        `given`: the client's (partition, replicas) pairs instead of an assignment made
        here; the partition count and replication factor must then be -1, as Kafka's
        CreateTopics wants."""
        if given:
            assignments = self._given_assignments(name, num_partitions, replication_factor, given)
            num_partitions, replication_factor = len(assignments), len(assignments[0])
        partitions, rf, overrides = self.validate_new_topic(
            name, num_partitions, replication_factor, configs or {}
        )
        if not given:
            assignments = self._assign(name, partitions, rf, first=0)
        return TopicMeta(
            name=name,
            partitions=partitions,
            replication_factor=rf,
            configs=overrides,
            assignments=assignments,
        )

    def _assign(self, name: str, count: int, rf: int, first: int) -> list[list[int]]:
        """Replica lists of topic `name`'s partitions `first`.. (`count` of them) over
        the live brokers, their racks and hosts; a warning when the hosts are fewer
        than `rf`."""
        live = self.replicas.cluster.brokers
        racks = {b: info.rack for b, info in live.items()}
        hosts = broker_hosts(live, self.config.listeners.inter_broker)
        try:
            lists = assign_replicas(
                racks, count, rf, start=first_broker(name, racks) + first, hosts=hosts
            )
        except AssignmentError as e:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
        shortfall = host_shortfall(hosts, rf)
        if shortfall is not None:
            log.warning("topic %s: %s", name, shortfall)
        return lists

    def _given_assignments(
        self, name: str, num_partitions: int, rf: int, given: list[tuple[int, list[int]]]
    ) -> list[list[int]]:
        """The client's replica lists in partition order, checked against the
        registered brokers (TopicError)."""
        if num_partitions != -1 or rf != -1:
            raise TopicError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        self.check_new_name(name)
        try:
            return check_topic_assignment(given, set(self.replicas.cluster.brokers))
        except InvalidAssignment as e:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e)) from None

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
    ) -> TopicMeta:
        """Create a topic now on a single node; in a cluster, write it to ZooKeeper in
        the background (auto-creation: the client retries until it is there).
        CreateTopics awaits its creation instead (the cluster view's create_and_wait)."""
        meta = self.plan_topic(name, num_partitions, replication_factor, configs)
        self.replicas.cluster.submit_create(meta)
        return meta

    def delete_topic(self, name: str) -> None:
        self.existing_topic(name)
        if not self.config["delete.topic.enable"]:
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED)
        self.replicas.cluster.submit_delete(name)

    def existing_topic(self, name: str) -> TopicMeta:
        """The topic `name`, or TopicError as Kafka answers for a bad or unknown one."""
        try:
            validate_topic_name(name)
        except InvalidTopicName as e:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
        meta = self.replicas.store.get(name)
        if meta is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
            )
        return meta

    def with_configs(self, name: str, overrides: dict[str, str]) -> TopicMeta:
        """Topic `name` with `overrides` as its whole override set, checked: unknown
        names and bad values are INVALID_CONFIG."""
        meta = self.existing_topic(name)
        for key in overrides:
            if key not in TOPIC_CONFIG_NAMES:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
        try:
            self.replicas.log_config(overrides)
        except ValueError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid config: {e}") from None
        return dataclasses.replace(meta, configs=dict(overrides))

    async def alter_topic(self, meta: TopicMeta) -> None:
        """Make `meta` (from `with_configs` or `with_partitions`) the topic's state:
        new config overrides, added partitions."""
        await self.replicas.cluster.write_topic(meta)

    def with_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None
    ) -> TopicMeta:
        """Topic `name` grown to `count` partitions (CreatePartitions), checked as
        Kafka does; `assignments` (replica lists of the new partitions) or None to
        assign them as for a new topic."""
        meta = self.existing_topic(name)
        if count < meta.partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {meta.partitions} partitions, which is higher than "
                f"the requested {count}.",
            )
        if count == meta.partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {meta.partitions} partitions."
            )
        if count > MAX_PARTITIONS:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, f"Number of partitions must be 1..{MAX_PARTITIONS}."
            )
        added = count - meta.partitions
        rf = len(meta.assignments[0])
        live = self.replicas.cluster.brokers
        if assignments is not None:
            try:
                check_new_assignments(assignments, added, rf, set(live), meta.partitions)
            except InvalidAssignment as e:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e)) from None
            new = [list(a) for a in assignments]
        else:
            new = self._assign(name, added, rf, first=meta.partitions)
        return dataclasses.replace(meta, partitions=count, assignments=meta.assignments + new)

    def auto_create(self, name: str) -> ErrorCode:
        """Create `name` on first use if allowed: NONE if it exists or was created."""
        if name in self.replicas.store:
            return ErrorCode.NONE
        try:
            validate_topic_name(name)
        except InvalidTopicName:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        if not self.config["auto.create.topics.enable"]:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            self.create_topic(name)
        except TopicError as e:
            return e.code
        return ErrorCode.NONE
