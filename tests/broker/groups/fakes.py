"""An in-memory OffsetsStore and a driver for GroupCoordinator unit tests.

The store keeps real record-batch bytes (what the coordinator appends), so reading
back exercises the same encoding a PartitionLog would hold.
"""

import asyncio
from collections import defaultdict

from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from broker.groups.storage import StoreError, records_in
from broker.protocol.records import iter_batches

RANGE = [("range", b"sub-range")]


class MemoryStore:
    def __init__(self):
        self.data: dict[int, bytearray] = defaultdict(bytearray)
        self.fail_with = None  # an ErrorCode makes every append fail

    async def append(self, partition: int, records: bytes) -> int:
        if self.fail_with is not None:
            raise StoreError(self.fail_with)
        self.data[partition] += records
        return 0

    def read_all(self, partition: int):
        return list(records_in(bytes(self.data[partition])))

    def read_batches(self, partition: int):
        return list(iter_batches(bytes(self.data[partition])))


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


class Driver:
    """Issues requests to a coordinator as clients would, each join/sync as a task."""

    def __init__(self, store=None, **config):
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.store = store or MemoryStore()
        self.coord = GroupCoordinator(self.store, CoordinatorConfig(**config))
        for p in range(self.coord.config.num_partitions):
            self.coord.load_partition(p, 0)

    def join(
        self,
        group="g",
        member_id="",
        instance=None,
        protocols=RANGE,
        now=0,
        v4=False,
        session=10_000,
        rebalance=30_000,
        client_id="client",
        protocol_type="consumer",
    ) -> asyncio.Task:
        return asyncio.ensure_future(
            self.coord.join_group(
                group,
                member_id,
                instance,
                client_id,
                "/127.0.0.1",
                session,
                rebalance,
                protocol_type,
                protocols,
                v4,
                now,
            )
        )

    def sync(self, group, member_id, generation, assignments=None, now=0, instance=None):
        return asyncio.ensure_future(
            self.coord.sync_group(group, member_id, instance, generation, assignments or {}, now)
        )

    def heartbeat(self, group, member_id, generation, now=0, instance=None):
        return self.coord.heartbeat(group, member_id, instance, generation, now)

    async def stable_pair(self, group="g"):
        """Two members in a Stable group (generation 1); returns (leader, follower) ids.
        Its timings need a Driver built with initial_rebalance_delay_ms=3000."""
        assert self.coord.config.initial_rebalance_delay_ms == 3000, "stable_pair: 3 s delay"
        t1, t2 = self.join(group, client_id="a"), self.join(group, client_id="b", now=100)
        await settle()
        await self.coord.tick(3000)  # b arrived during the delay: one more round
        await self.coord.tick(6000)
        r1, r2 = await t1, await t2
        s2 = self.sync(group, r2.member_id, 1, now=6000)
        s1 = self.sync(group, r1.member_id, 1, {r1.member_id: b"A1", r2.member_id: b"A2"}, 6000)
        assert (await s1).assignment == b"A1"
        assert (await s2).assignment == b"A2"
        return r1.member_id, r2.member_id
