"""Producer ids for InitProducerId: unique across restarts, handed out from blocks.

Like Kafka's ProducerIdManager, ids are reserved in blocks: the end of the last
reserved block is persisted before any id from it is handed out, so a restart (even
after SIGKILL) continues after that block and never reuses an id; the unused rest of
a block is simply skipped. On a single node the block pointer lives in
`<data dir>/meta/producer-id-block` (written atomically: temp file, fsync, rename);
a cluster can pass its own `reserve_block` (e.g. a ZooKeeper compare-and-set). An
unreadable pointer file is logged and replaced by a time-derived start (current ms x
1000), far above any id a block counter reached, so start-up never fails on it.

Idempotent producers without a transactional id get a fresh id with epoch 0 on each
InitProducerId, as in Kafka.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from common.fsutil import atomic_write

log = logging.getLogger(__name__)

DEFAULT_BLOCK_SIZE = 1000


class FileBlockStore:
    """The next unreserved producer id, persisted in one small text file.
    Owned by the ProducerIdManager; not thread-safe."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def reserve(self, size: int) -> int:
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


class ProducerIdManager:
    """Hands out producer ids. Owned by the broker; call from its event loop only."""

    def __init__(
        self,
        reserve_block: Callable[[int], int],
        block_size: int = DEFAULT_BLOCK_SIZE,
    ):
        self._reserve_block = reserve_block
        self.block_size = block_size
        self._next = 0
        self._end = 0

    @classmethod
    def for_data_dir(cls, data_dir: str | Path, block_size: int = DEFAULT_BLOCK_SIZE):
        store = FileBlockStore(Path(data_dir) / "meta" / "producer-id-block")
        return cls(store.reserve, block_size)

    def next_id(self) -> int:
        if self._next >= self._end:
            self._next = self._reserve_block(self.block_size)
            self._end = self._next + self.block_size
        pid = self._next
        self._next += 1
        return pid
