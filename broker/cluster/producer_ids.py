"""Producer ids in a cluster: blocks reserved in ZooKeeper, unique across brokers.

Every broker answers InitProducerId, so ids must not depend on which broker a client
asks. As in Kafka's ZooKeeper mode, `/latest_producer_id_block` holds the last block
handed out (`{"version": 1, "broker": id, "block_start": "s", "block_end": "e"}`,
`block_end` inclusive); a broker reserves the next block by a compare-and-set on that
znode's version and hands ids out of it until it is used up. A broker that restarts
reserves a new block, so ids are never reused; the unused rest of a block is skipped.

(With per-broker blocks, two brokers handed out the same first id: a second
idempotent producer then had its batches taken for retries of the first one's, with
the same id, epoch and sequence numbers, and acknowledged without being written.)
"""

from __future__ import annotations

import asyncio

import orjson
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000


def _encode(broker_id: int, start: int, size: int) -> bytes:
    return orjson.dumps(
        {
            "version": 1,
            "broker": broker_id,
            "block_start": str(start),
            "block_end": str(start + size - 1),
        }
    )


class ZkProducerIds:
    """Owned by the cluster node; event-loop only (an asyncio lock serialises
    reservations)."""

    def __init__(self, session, broker_id: int, block_size: int = BLOCK_SIZE):
        self.zk = session
        self.broker_id = broker_id
        self.block_size = block_size
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                self._next = await self._reserve()
                self._end = self._next + self.block_size
            pid = self._next
            self._next += 1
            return pid

    async def _reserve(self) -> int:
        while True:
            try:
                data, stat = await self.zk.call("get", PATH)
            except NoNodeError:
                try:
                    await self.zk.call("create", PATH, _encode(self.broker_id, 0, self.block_size))
                    return 0
                except NodeExistsError:
                    continue
            start = int(orjson.loads(data)["block_end"]) + 1 if data else 0
            try:
                await self.zk.call(
                    "set",
                    PATH,
                    _encode(self.broker_id, start, self.block_size),
                    version=stat.version,
                )
                return start
            except BadVersionError:
                continue
