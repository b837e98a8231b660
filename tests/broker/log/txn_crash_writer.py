"""Subprocess for the transactional crash test: three producers open, write, commit
and abort transactions forever in a fixed pattern, flushing and checkpointing every
N steps and printing the flushed log end offset. The parent SIGKILLs it at a random
moment. Run: python -m tests.broker.log.txn_crash_writer DIR N"""

import sys
import time
from pathlib import Path

from broker.log import LogConfig, LogManager
from broker.protocol.records import BatchBuilder

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=256)


def step(log, i: int) -> None:
    """Step i: a transactional batch, a commit or an abort, for producer 1 + i % 3."""
    pid = 1 + i % 3
    kind = (i * 7 + i // 3) % 5
    if kind >= 3:
        log.append_txn_marker(pid, 0, commit=kind == 3, coordinator_epoch=0)
        return
    entry = log.producer_state.producers.get(pid)
    seq = 0 if entry is None or entry.last_seq is None else entry.last_seq + 1
    b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
    now = int(time.time() * 1000)
    for j in range(1 + i % 3):
        b.append((b"%d:%d:" % (i, j)).ljust(120, b"t"), timestamp_ms=now)
    log.append(b.build())


def main() -> None:
    data_dir, every = Path(sys.argv[1]), int(sys.argv[2])
    manager = LogManager(data_dir, CONFIG)
    log = manager.get("txcrash", 0) or manager.create("txcrash", 0, CONFIG)
    i = log.log_end_offset  # any start works: the pattern only needs variety
    while True:
        step(log, i)
        i += 1
        if i % every == 0:
            log.flush()
            manager.checkpoint_recovery_points()
            print(log.log_end_offset, flush=True)


if __name__ == "__main__":
    main()
