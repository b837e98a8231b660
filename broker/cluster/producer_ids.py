"""Producer ids for InitProducerId: unique across restarts and brokers, handed out
from blocks.

Like Kafka's ProducerIdManager, ids are reserved in blocks: the end of the last
reserved block is persisted before any id from it is handed out, so a restart (even
after SIGKILL) continues after that block and never reuses an id; the unused rest of
a block is simply skipped. `ProducerIdBlocks` hands ids out of the current block and
asks its block store for the next one; the broker's cluster view picks the store
once at start:

- a single node: `FileBlockStore`, the block pointer in
  `<data dir>/meta/producer-id-block` (written atomically: temp file, fsync,
  rename). An unreadable pointer file is logged and replaced by a time-derived start
  (current ms x 1000), far above any id a block counter reached, so start-up never
  fails on it.
- a cluster: `ZkBlockStore`. Every broker answers InitProducerId, so ids must not
  depend on which broker a client asks. As in Kafka's ZooKeeper mode,
  `/latest_producer_id_block` holds the last block handed out
  (`{"version": 1, "broker": id, "block_start": "s", "block_end": "e"}`, `block_end`
  inclusive); a broker reserves the next block by a compare-and-set on that znode's
  version. (With per-broker blocks, two brokers handed out the same first id: a
  second idempotent producer then had its batches taken for retries of the first
  one's, with the same id, epoch and sequence numbers, and acknowledged without being
  written.) A failed reservation raises `ProducerIdsUnavailable`, which clients get
  as a retriable error.

Idempotent producers without a transactional id get a fresh id with epoch 0 on each
InitProducerId, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from common.fsutil import atomic_write

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
ZK_PATH = "/latest_producer_id_block"


class ProducerIdsUnavailable(Exception):
    """The next block could not be reserved (ZooKeeper unreachable): retriable."""


class ProducerIdBlocks:
    """Hands out producer ids from blocks its `reserve_block(size) -> start` reserves.
    Owned by the broker's cluster view; event-loop only (an asyncio lock serialises
    reservations)."""

    def __init__(
        self, reserve_block: Callable[[int], Awaitable[int]], block_size: int = BLOCK_SIZE
    ):
        self._reserve_block = reserve_block
        self.block_size = block_size
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                self._next = await self._reserve_block(self.block_size)
                self._end = self._next + self.block_size
            pid = self._next
            self._next += 1
            return pid


class FileBlockStore:
    """The next unreserved producer id of a single node, persisted in one small text
    file. Not thread-safe."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def in_data_dir(cls, data_dir: str | Path) -> FileBlockStore:
        return cls(Path(data_dir) / "meta" / "producer-id-block")

    async def reserve(self, size: int) -> int:
        """Reserve [start, start + size) and return start."""
        start = 0
        if self.path.exists():
            text = self.path.read_text(errors="replace").strip()
            if text.isdigit():
                start = int(text)
            else:
                # Never reuse an id: jump far past anything a block counter reached.
                start = int(time.time() * 1000) * 1000
                log.error("%s is unreadable (%r); continuing at %d", self.path, text[:40], start)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, f"{start + size}\n")
        return start


def _encode(broker_id: int, start: int, size: int) -> bytes:
    return orjson.dumps(
        {
            "version": 1,
            "broker": broker_id,
            "block_start": str(start),
            "block_end": str(start + size - 1),
        }
    )


class ZkBlockStore:
    """The cluster's last reserved block, in ZooKeeper (`session` a `zk.ZkSession`)."""

    def __init__(self, session, broker_id: int):
        self.zk = session
        self.broker_id = broker_id

    async def reserve(self, size: int) -> int:
        try:
            return await self._reserve(size)
        except Exception as e:  # ZooKeeper unreachable, whatever the way
            log.warning("producer id block reservation failed: %s", e)
            raise ProducerIdsUnavailable(str(e)) from None

    async def _reserve(self, size: int) -> int:
        while True:
            try:
                data, stat = await self.zk.call("get", ZK_PATH)
            except NoNodeError:
                try:
                    await self.zk.call("create", ZK_PATH, _encode(self.broker_id, 0, size))
                    return 0
                except NodeExistsError:
                    continue
            start = int(orjson.loads(data)["block_end"]) + 1 if data else 0
            try:
                await self.zk.call(
                    "set", ZK_PATH, _encode(self.broker_id, start, size), version=stat.version
                )
                return start
            except BadVersionError:
                continue
