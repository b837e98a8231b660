"""broker/log: the storage engine.

A partition is a directory `<topic>-<n>/` of segments `<20-digit base offset>.log`
(record batches exactly as on the wire) with sparse `.index` and `.timeindex` files.
The layers, top down (Kafka's names):

- `partition.py` PartitionLog (UnifiedLog): what the rest of the broker calls; the
  log start offset, transactions, and the order of an append;
- `validator.py` LogValidator: checks produced batches and assigns their offsets,
  no I/O;
- `local_log.py` LocalLog: the segments on disk: append, roll, flush, read, truncate;
- `segments.py` LogSegments: the ordered segments, "which segment holds offset X";
- `segment.py` LogSegment and `index.py`, `txn_index.py`: one segment's files.

Beside them: `producer_state.py` (idempotence and transactions per producer),
`epoch.py` (leader epochs), `aborted.py` (read_committed's aborted transactions),
`loader.py` (crash recovery), `cleaner.py` (compaction and its state) and
`manager.py` (the data directory and the periodic duties).
"""

from broker.log.common import (
    AppendInfo,
    CorruptBatchError,
    FetchSlice,
    InvalidOffsetError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from broker.log.config import TOPIC_CONFIG_NAMES, LogConfig
from broker.log.epoch import LeaderEpochCache
from broker.log.index import OffsetIndex, TimeIndex
from broker.log.manager import LogManager
from broker.log.partition import PartitionLog
from broker.log.segment import LogSegment

__all__ = [
    "TOPIC_CONFIG_NAMES",
    "AppendInfo",
    "CorruptBatchError",
    "FetchSlice",
    "InvalidOffsetError",
    "LeaderEpochCache",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordTooLargeError",
    "TimeIndex",
]
