"""SingleNode: the cluster view of a broker alone (no `zookeeper.connect`).

It is its own cluster: the only live broker, the controller, and the leader of every
partition it has (each with itself as the only replica, so the ISR is itself and the
high watermark moves with every append). Its metadata is local: topics in the
`LocalMetadataStore` the replica manager keeps, producer-id blocks, SCRAM
credentials and ACLs in files under the data directory. Topic writes are applied to
the replica manager at once. See `broker.cluster.view` for the interface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from broker.cluster.assignment import InvalidAssignment
from broker.cluster.producer_ids import FileBlockStore, ProducerIdBlocks
from broker.cluster.reassignment import Listing, Outcome, check_target
from broker.cluster.view import (
    ACTIVE_CONTROLLER_DOC,
    OFFLINE_DOC,
    PartitionView,
    TopicPartition,
    answer_everywhere,
)
from broker.cluster.zk import BrokerInfo
from broker.dynamic_config import LocalBrokerConfigStore
from broker.groups.group_config_store import LocalGroupConfigStore
from broker.metrics import gauge
from broker.protocol.errors import ErrorCode
from broker.quotas.store import LocalQuotaStore
from broker.sasl.credentials import LocalCredentialStore
from broker.security.acl_store import LocalAclStore
from broker.telemetry.store import LocalClientMetricsStore

if TYPE_CHECKING:
    from broker.cluster.metadata_store import TopicMeta
    from broker.cluster.partition import Partition
    from broker.cluster.replica_manager import ReplicaManager
    from broker.security.acl import Entries, Resource
    from broker.transactions.channel import BrokerChannels


class SingleNode:
    """Owned by the BrokerCore; event-loop only."""

    elects_leaders = False
    registered = True

    def __init__(
        self,
        broker_id: int,
        rack: str | None,
        data_dir: Path,
        replicas: ReplicaManager,
        endpoints: Callable[[], dict[str, tuple[str, int]]],
    ):
        self.broker_id = broker_id
        self.rack = rack
        self.data_dir = data_dir
        self.replicas = replicas
        self.endpoints = endpoints  # every listener's advertised address
        self.producer_ids = ProducerIdBlocks(FileBlockStore.in_data_dir(data_dir).reserve)
        self.credentials = LocalCredentialStore(data_dir)
        self.client_quotas = LocalQuotaStore(data_dir)
        self.broker_configs = LocalBrokerConfigStore(data_dir)
        self.client_metrics = LocalClientMetricsStore(data_dir)
        self.group_configs = LocalGroupConfigStore(data_dir)
        self.fence_listeners: list[Callable[[bool], None]] = []  # never told: never fenced

    @property
    def fenced(self) -> bool:
        return False

    @property
    def brokers(self) -> Mapping[int, BrokerInfo]:
        return {self.broker_id: BrokerInfo(self.broker_id, self.endpoints(), self.rack)}

    @property
    def topics(self) -> Mapping[str, TopicMeta]:
        return self.replicas.topics()

    async def start(self) -> None:
        """Nothing to join."""

    async def stop(self) -> None:
        """Nothing to leave."""

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """No other broker to hand leadership to."""

    def leader_of(self, topic: str, index: int) -> int:
        return self.broker_id

    def partition_view(self, topic: str, index: int) -> PartitionView:
        p = self.replicas.partitions[(topic, index)]
        return PartitionView(p.leader, p.leader_epoch, list(p.replicas), sorted(p.isr), [])

    def active_controller_id(self) -> int:
        return self.broker_id

    def check_lease(self) -> None:
        """No session to lose."""

    def follower_fetched(self, partition: Partition, replica_id: int) -> None:
        """No followers."""

    async def elect_leaders(
        self, wanted: list[TopicPartition] | None, unclean: bool
    ) -> dict[TopicPartition, ErrorCode]:
        return answer_everywhere(self.replicas.topics(), wanted, ErrorCode.ELECTION_NOT_NEEDED)

    async def alter_reassignments(
        self, wanted: dict[TopicPartition, list[int] | None]
    ) -> tuple[ErrorCode, dict[TopicPartition, Outcome]]:
        """As a one-broker Kafka: a move to this broker is already done, any other
        broker is unknown (INVALID_REPLICA_ASSIGNMENT), nothing is ever in progress."""
        topics = self.replicas.topics()
        results: dict[TopicPartition, Outcome] = {}
        for (topic, p), target in wanted.items():
            meta = topics.get(topic)
            origin = meta.assignments[p] if meta is not None and 0 <= p < meta.partitions else []
            try:
                if target is not None:
                    check_target(p, target, origin, {self.broker_id})
            except InvalidAssignment as e:
                results[(topic, p)] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e))
                continue
            if target is None:
                results[(topic, p)] = (
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    "No partition reassignment is in progress.",
                )
            elif not origin:
                results[(topic, p)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "The partition does not exist.",
                )
            else:
                results[(topic, p)] = (ErrorCode.NONE, None)
        return ErrorCode.NONE, results

    def list_reassignments(
        self, wanted: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, Listing]]:
        return ErrorCode.NONE, {}

    def submit_create(self, meta: TopicMeta) -> None:
        self.replicas.create_local(meta)

    async def create_and_wait(self, meta: TopicMeta, timeout_s: float) -> None:
        self.replicas.create_local(meta)

    def submit_delete(self, name: str) -> None:
        self.replicas.delete_local(name)

    async def write_topic(self, meta: TopicMeta) -> None:
        self.replicas.alter_local(meta)

    async def open_acl_store(self) -> tuple[LocalAclStore, dict[Resource, Entries]]:
        store = LocalAclStore(self.data_dir)
        return store, store.load()

    def open_channels(self) -> BrokerChannels:
        raise LookupError("a single node has no other broker to talk to")

    def collect_metrics(self) -> Iterator[Metric]:
        yield gauge("offline_partitions", OFFLINE_DOC, 0)
        yield gauge("active_controller", ACTIVE_CONTROLLER_DOC, 1)
