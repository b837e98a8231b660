"""Partition state: who leads, who is in sync, and how far data is committed.

One `Partition` per (topic, index) hosted on this broker. It wraps the local
`PartitionLog` and holds the replication state Kafka keeps per partition:
`leader`, `replicas`, `isr`, `leader_epoch` and the `high_watermark`, the offset
below which records are committed (replicated to every ISR member) and visible to
consumers.

High watermark = min(log end offset of each ISR member). On a single node the ISR is
{self}, so the high watermark is the leader's log end offset right after each
append. Replication extends `_replica_leos` with follower positions reported by
follower fetches (`update_follower_leo`) and shrinks/expands `isr`; the rule
in `maybe_advance_high_watermark` takes the minimum over the ISR and over `joining`,
a follower whose addition to the ISR is being written to ZooKeeper (Kafka's maximal
ISR, KIP-497): from the moment the write may land, the controller may elect that
follower, so no record is committed without it. (A shrink needs no such care: the
leader keeps the larger ISR until ZooKeeper took the smaller one.)

Last stable offset (KIP-98): read_committed consumers read up to
`last_stable_offset` = min(high watermark, first offset of the oldest transaction
that is ongoing or whose marker the high watermark has not passed yet). It is
computed when asked, from the log's producer state, so it moves with the high
watermark and with every marker; both moves fire `on_change`, which re-checks
read_committed fetches waiting in the purgatory. On a partition with no transaction
in flight it is the high watermark at the cost of two emptiness checks.

Whenever the log end or the high watermark moves, `on_change(partition)` fires; the
replica manager uses it to re-check delayed produce and fetch operations.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.protocol.errors import ApiError, ErrorCode


class PartitionError(ApiError):
    """A request on this partition fails with `code` (an ErrorCode)."""


class Partition:
    """State of one hosted partition.

    Owned by the ReplicaManager; used only on the broker's event loop, never across
    threads.
    """

    def __init__(
        self,
        topic: str,
        index: int,
        log,
        broker_id: int,
        replicas: list[int],
        min_insync_replicas: int = 1,
        leader_epoch: int = 0,
        on_change: Callable[[Partition], None] | None = None,
    ):
        self.topic = topic
        self.index = index
        self.key = (topic, index)
        self.log = log
        self.broker_id = broker_id
        self.replicas = list(replicas)
        self.leader = broker_id
        self.isr = {broker_id}
        self.leader_epoch = leader_epoch
        self.min_insync_replicas = min_insync_replicas
        self.on_change = on_change
        self._replica_leos: dict[int, int] = {}
        self.high_watermark = log.log_end_offset
        # Replication (cluster mode): the state znode version for compare-and-set,
        # per-follower (last fetch time, leader LEO then) and last caught-up time.
        self.zk_version = -1
        self.epoch_start_offset = 0
        self._last_fetch: dict[int, tuple[int, int]] = {}
        self._caught_up_ms: dict[int, int] = {}
        self.joining: int | None = None

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to (see the module docstring)."""
        hw = self.high_watermark
        first = self.log.first_unstable_offset(hw)
        if first is None or first >= hw:
            return hw
        return max(first, self.log.log_start_offset)  # DeleteRecords may pass a txn start

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """A client's `current_leader_epoch` (KIP-320; -1: not given) against this
        replica's: FENCED_LEADER_EPOCH when the client's is older, UNKNOWN_LEADER_EPOCH
        when newer (this replica has not heard of it yet), NONE when they agree."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.FENCED_LEADER_EPOCH

    def delete_records_before(self, offset: int) -> bool:
        """DeleteRecords on this leader: the log starts at `offset` (-1: the high
        watermark); whether it moved. Raises ApiError as Kafka answers."""
        name = f"{self.topic}-{self.index}"
        if not self.is_leader:
            raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if not self.log.config.delete:
            raise ApiError(
                ErrorCode.POLICY_VIOLATION,
                f"Records of partition {name} can not be deleted due to the configured policy",
            )
        hw = self.high_watermark
        if offset == -1:
            offset = hw
        if not 0 <= offset <= hw:
            raise ApiError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot increment the log start offset to {offset} of partition "
                f"{name} since it is larger than the high watermark {hw}",
            )
        return self.log.delete_records_before(offset)

    def append_as_leader(self, records: bytes, required_acks: int, guard=None):
        """Append a produce request's record batches; returns the log's AppendInfo.
        `guard`: the KIP-890 verification guard of a transactional batch (see
        broker/log/producer_state.py), None when verification is off.

        Raises PartitionError for NOT_LEADER_OR_FOLLOWER and NOT_ENOUGH_REPLICAS, the
        log its own `ApiError`s for refused batches (nothing is appended then), and
        OSError when the write fails (rolled back to the last batch).
        """
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"ISR has {len(self.isr)} replicas, min.insync.replicas is "
                f"{self.min_insync_replicas}",
            )
        info = self.log.append(records, leader_epoch=self.leader_epoch, guard=guard)
        self.maybe_advance_high_watermark()
        if self.on_change is not None:
            self.on_change(self)
        return info

    def append_txn_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ):
        """Append a transaction coordinator's end-transaction marker as the leader;
        returns the log's AppendInfo. Raises PartitionError when not the leader.
        The caller awaits replication (acks=all) before answering, as for a produce."""
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        info = self.log.append_txn_marker(
            producer_id, producer_epoch, commit, coordinator_epoch, leader_epoch=self.leader_epoch
        )
        self.maybe_advance_high_watermark()
        if self.on_change is not None:
            self.on_change(self)
        return info

    def update_follower_leo(self, replica_id: int, log_end_offset: int) -> None:
        """Record a follower's position (from its fetch offset) and re-check the HW.

        Caught-up time (for the ISR, Kafka's rule): now if the follower asked for the
        leader's log end, else the time of its previous fetch if it asked for at least
        the log end the leader had then."""
        now = _now_ms()
        leader_leo = self.log.log_end_offset
        previous = self._last_fetch.get(replica_id)
        if log_end_offset >= leader_leo:
            self._caught_up_ms[replica_id] = now
        elif previous is not None and log_end_offset >= previous[1]:
            self._caught_up_ms[replica_id] = max(self._caught_up_ms.get(replica_id, 0), previous[0])
        self._last_fetch[replica_id] = (now, leader_leo)
        self._replica_leos[replica_id] = log_end_offset
        if self.maybe_advance_high_watermark() and self.on_change is not None:
            self.on_change(self)

    def maybe_advance_high_watermark(self) -> bool:
        """HW = min LEO over the ISR and the joining follower; it never moves backwards.
        True if it moved."""
        leo = self.log.log_end_offset
        new_hw = min(
            (leo if r == self.broker_id else self._replica_leos.get(r, 0)) for r in self.isr
        )
        if self.joining is not None:
            new_hw = min(new_hw, self._replica_leos.get(self.joining, 0))
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self.log.first_unstable_offset(new_hw)  # forgets transactions now stable
            return True
        return False

    def enough_replicas_for(self, offset: int) -> tuple[bool, ErrorCode]:
        """For acks=all: (done, error) once the HW covers `offset` or the ISR is too small."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= offset:
            if len(self.isr) < self.min_insync_replicas:
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE

    def read(
        self,
        offset: int,
        max_bytes: int,
        committed_only: bool = True,
        max_offset: int | None = None,
    ):
        """Records from `offset`: a FetchSlice or None; raises OffsetOutOfRangeError.

        Consumers read up to the high watermark, or up to `max_offset` when given
        (read_committed ones: the `last_stable_offset` they are answered); followers
        (committed_only=False) up to the log end.
        """
        if not committed_only:
            max_offset = None
        elif max_offset is None:
            max_offset = self.high_watermark
        return self.log.read(offset, max_bytes, max_offset=max_offset)

    # -- replication roles (a cluster; driven by ReplicaManager.become_leader_or_follower) -

    def isr_list(self) -> list[int]:
        return sorted(self.isr)

    def become_leader(self, epoch: int, isr, zk_version: int, now_ms: int) -> None:
        """Lead from now on in `epoch`; followers get a full lag period to show up."""
        self.leader = self.broker_id
        self.leader_epoch = epoch
        self.isr = set(isr)
        self.joining = None
        self.zk_version = zk_version
        self._replica_leos = {}
        self._last_fetch = {}
        self._caught_up_ms = {r: now_ms for r in self.replicas}
        leo = self.log.log_end_offset
        self.epoch_start_offset = leo
        if epoch > self.log.leader_epoch_cache.latest_epoch:
            self.log.leader_epoch_cache.assign(epoch, leo)
        self.high_watermark = min(self.high_watermark, leo)
        self.maybe_advance_high_watermark()
        if self.on_change is not None:
            self.on_change(self)

    def become_follower(self, leader: int, epoch: int, isr, zk_version: int) -> None:
        """Follow `leader` (-1: none known). Waiting acks=all produces fail now."""
        self.leader = leader
        self.leader_epoch = epoch
        self.isr = set(isr)
        self.joining = None
        self.zk_version = zk_version
        self._replica_leos = {}
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        if self.on_change is not None:
            self.on_change(self)

    def update_isr(self, isr, zk_version: int) -> None:
        """The ISR as ZooKeeper has it (own write, a re-read, or the controller's). A
        new version of the state settles a pending expansion (ZooKeeper took it, or
        another write came first and the expansion's compare-and-set fails)."""
        if zk_version != self.zk_version:
            self.joining = None
        self.isr = set(isr)
        self.zk_version = zk_version
        if self.is_leader and self.on_change is not None:
            self.maybe_advance_high_watermark()
            self.on_change(self)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        self.high_watermark = max(0, min(leader_high_watermark, self.log.log_end_offset))
        self.log.first_unstable_offset(self.high_watermark)  # forgets transactions now stable

    def lagging_followers(self, now_ms: int, lag_ms: int) -> set[int]:
        """ISR followers not caught up for more than `lag_ms`."""
        return {
            r
            for r in self.isr
            if r != self.broker_id and now_ms - self._caught_up_ms.get(r, 0) > lag_ms
        }

    def can_join_isr(self, replica_id: int) -> bool:
        leo = self._replica_leos.get(replica_id, -1)
        return leo >= self.high_watermark and leo >= self.epoch_start_offset


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
