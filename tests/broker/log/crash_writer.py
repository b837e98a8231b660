"""Subprocess for the crash test: appends deterministic batches forever, flushing and
checkpointing every N batches and printing the flushed log end offset. The parent
SIGKILLs it at a random moment. Run: python -m tests.broker.log.crash_writer DIR N"""

import sys
from pathlib import Path

from broker.log import LogConfig, LogManager
from broker.protocol.records import BatchBuilder, Codec

CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=1024)


def batch_for(i: int) -> bytes:
    """Batch number i: 1-5 records whose values name (i, j); every third is lz4."""
    b = BatchBuilder(codec=Codec.LZ4 if i % 3 == 0 else Codec.NONE)
    for j in range(1 + i % 5):
        b.append(
            (b"%d:%d:" % (i, j)).ljust(200 + (i * 37) % 300, b"p"), key=b"k%d" % i, timestamp_ms=i
        )
    return b.build()


def main() -> None:
    data_dir, every = Path(sys.argv[1]), int(sys.argv[2])
    manager = LogManager(data_dir, CONFIG)
    log = manager.get("crash", 0) or manager.create("crash", 0, CONFIG)
    i = 0  # continue the numbering after what survived the previous crash
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = log.read_batches(offset, 1 << 20)
        i += len(batches)
        offset = batches[-1].next_offset
    while True:
        log.append(batch_for(i))
        i += 1
        if i % every == 0:
            log.flush()
            manager.checkpoint_recovery_points()
            print(log.log_end_offset, flush=True)


if __name__ == "__main__":
    main()
