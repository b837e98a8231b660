"""broker/log: the storage engine.

A partition is a directory `<topic>-<n>/` of segments `<20-digit base offset>.log`
(record batches exactly as on the wire) with sparse `.index` and `.timeindex` files;
see `partition.py` for the append/read paths, `loader.py` for crash recovery,
`cleaner.py` for compaction and `manager.py` for the data directory.
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
