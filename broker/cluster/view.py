"""The cluster as this broker sees it: one interface, two implementations.

`BrokerCore` chooses the implementation once, at start: `SingleNode`
(broker.cluster.single_node) when `zookeeper.connect` is unset, else `ClusterNode`
(broker.cluster.node), a member of a ZooKeeper-coordinated cluster. Request
handlers, the replica manager and the coordinators ask the view what they need and
never which mode the broker runs in:

- who lives and who leads: `brokers`, `topics`, `leader_of`, `partition_view`,
  `active_controller_id`, `fenced`, `registered`;
- topic writes: `submit_create` (auto-creation), `create_and_wait` (CreateTopics),
  `submit_delete`, `write_topic` (AlterConfigs, CreatePartitions). A single node
  applies them to its replica manager at once; a cluster writes them to ZooKeeper
  and every broker applies them from its watches;
- what depends on where metadata lives: `producer_ids`, the SCRAM `credentials`,
  the `client_quotas` (broker.quotas.store), the dynamic `broker_configs`
  (broker.dynamic_config), the `client_metrics` subscriptions (broker.telemetry.store),
  the dynamic `group_configs` (broker.groups.group_config_store),
  `open_acl_store()`, `open_channels()` to the other brokers;
- replication duties: `check_lease` before a produce appends, `follower_fetched`
  after a follower's fetch (ISR expansion), `elect_leaders`,
  `alter_reassignments` and `list_reassignments` (broker.cluster.reassignment);
- `elects_leaders`: False when this broker leads every partition it has (single
  node), True when partitions wait for the controller to give them a role;
- `collect_metrics()`: the gauges only the cluster knows (active controller,
  offline partitions).

Event-loop only, like everything the core owns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol

from broker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from broker.cluster.metadata_store import TopicMeta
    from broker.cluster.partition import Partition
    from broker.cluster.producer_ids import ProducerIdBlocks
    from broker.cluster.reassignment import Listing, Outcome
    from broker.cluster.zk import BrokerInfo
    from broker.cluster.zk_acls import ZkAclStore
    from broker.dynamic_config import LocalBrokerConfigStore, ZkBrokerConfigStore
    from broker.groups.group_config_store import LocalGroupConfigStore, ZkGroupConfigStore
    from broker.quotas.store import LocalQuotaStore, ZkQuotaStore
    from broker.sasl.credentials import LocalCredentialStore, ZkCredentialStore
    from broker.security.acl import Entries, Resource
    from broker.security.acl_store import LocalAclStore
    from broker.telemetry.store import LocalClientMetricsStore, ZkClientMetricsStore
    from broker.transactions.channel import BrokerChannels

TopicPartition = tuple[str, int]
OFFLINE_DOC = "Partitions without a live leader (reported by the active controller)"
ACTIVE_CONTROLLER_DOC = "1 on the active controller"


class PartitionView(NamedTuple):
    """A partition as Metadata describes it."""

    leader: int  # -1: none that serves
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]  # replicas not live


class ClusterView(Protocol):
    producer_ids: ProducerIdBlocks
    fence_listeners: list[Callable[[bool], None]]  # told when fenced and unfenced

    @property
    def broker_id(self) -> int: ...

    @property
    def credentials(self) -> LocalCredentialStore | ZkCredentialStore: ...

    @property
    def client_quotas(self) -> LocalQuotaStore | ZkQuotaStore: ...

    @property
    def broker_configs(self) -> LocalBrokerConfigStore | ZkBrokerConfigStore: ...

    @property
    def client_metrics(self) -> LocalClientMetricsStore | ZkClientMetricsStore: ...

    @property
    def group_configs(self) -> LocalGroupConfigStore | ZkGroupConfigStore: ...

    @property
    def elects_leaders(self) -> bool: ...

    @property
    def brokers(self) -> Mapping[int, BrokerInfo]:
        """The live brokers, by id."""
        ...

    @property
    def topics(self) -> Mapping[str, TopicMeta]:
        """Every topic of the cluster, by name."""
        ...

    @property
    def registered(self) -> bool:
        """Counted as live by the other brokers."""
        ...

    @property
    def fenced(self) -> bool:
        """True while this broker may no longer lead or follow (see broker.cluster.lease)."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def controlled_shutdown(self, timeout_s: float) -> None: ...

    def leader_of(self, topic: str, index: int) -> int:
        """The serving leader's broker id, -1 if none."""
        ...

    def partition_view(self, topic: str, index: int) -> PartitionView: ...

    def active_controller_id(self) -> int:
        """The controller's broker id as clients are told it, -1 if unknown."""
        ...

    def check_lease(self) -> None:
        """Before a produce appends: fence now if the ZooKeeper session ran out."""
        ...

    def follower_fetched(self, partition: Partition, replica_id: int) -> None:
        """A follower fetched at or below the log end: maybe take it into the ISR."""
        ...

    async def elect_leaders(
        self, wanted: list[TopicPartition] | None, unclean: bool
    ) -> dict[TopicPartition, ErrorCode]: ...

    async def alter_reassignments(
        self, wanted: dict[TopicPartition, list[int] | None]
    ) -> tuple[ErrorCode, dict[TopicPartition, Outcome]]:
        """Start, replace or (None) cancel moves: the request's error code and each
        partition's outcome."""
        ...

    def list_reassignments(
        self, wanted: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, Listing]]:
        """The moves in progress among `wanted` (None: all)."""
        ...

    def submit_create(self, meta: TopicMeta) -> None: ...

    async def create_and_wait(self, meta: TopicMeta, timeout_s: float) -> None: ...

    def submit_delete(self, name: str) -> None: ...

    async def write_topic(self, meta: TopicMeta) -> None: ...

    async def open_acl_store(
        self,
    ) -> tuple[LocalAclStore | ZkAclStore, dict[Resource, Entries]]: ...

    def open_channels(self) -> BrokerChannels:
        """Connections to the other brokers (the transaction coordinator's)."""
        ...

    def collect_metrics(self) -> Iterator[Metric]: ...


def answer_everywhere(
    topics: Mapping[str, TopicMeta], wanted: list[TopicPartition] | None, code: ErrorCode
) -> dict[TopicPartition, ErrorCode]:
    """`code` for every wanted partition that exists (None: every partition of every
    topic), UNKNOWN_TOPIC_OR_PARTITION for the others: ElectLeaders where no
    controller runs the election."""
    if wanted is None:
        wanted = [(n, p) for n, meta in sorted(topics.items()) for p in range(meta.partitions)]
    return {
        (t, p): code
        if t in topics and 0 <= p < topics[t].partitions
        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for t, p in wanted
    }
