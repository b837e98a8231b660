"""Open files per partition, as Kafka keeps them: one descriptor per segment (its
`.log`). The active segment's indexes are in memory, with no mapping; a closed
segment's are mapped only once looked up (one descriptor each on CPython before
3.13, whose mmap keeps a duplicate of the file's descriptor), and loading a log
checks them without mapping them. (A broker held 5 descriptors per partition, then
3, which capped it near 6,600 single-segment partitions under a 20,000 open-file
limit.)"""

import os
import sys
from collections import Counter
from pathlib import Path

from broker.log import LogConfig, PartitionLog
from tests.broker.log.util import make_batch, read_all

MMAP_KEEPS_A_DESCRIPTOR = sys.version_info < (3, 13)


def open_files(under: Path) -> Counter:
    """This process's descriptors of files under `under`, by suffix."""
    found: Counter = Counter()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)):
            found[Path(target).suffix] += 1
    return found


def per_mapping(n: int) -> int:
    return n if MMAP_KEEPS_A_DESCRIPTOR else 0


def fill(log: PartitionLog, batches: int) -> None:
    for i in range(batches):
        log.append(make_batch(5, ts=1000 + i, size=200))


def test_a_closed_segment_holds_only_its_log_file_until_looked_up(tmp_path):
    config = LogConfig(segment_bytes=4096, index_interval_bytes=1)  # an entry per batch
    log = PartitionLog(tmp_path / "t-0", config, recovery_point=0)
    fill(log, 30)
    log.local_log.reap_flushes(wait=True)
    segments = len(log.local_log.segments)
    assert segments >= 4
    # every .log open, and nothing else: the active segment's indexes are in memory
    assert open_files(tmp_path) == Counter({".log": segments})
    assert log.read(7, 1 << 20) is not None  # offset 7: inside segment 0, looked up
    assert open_files(tmp_path)[".index"] == per_mapping(1)
    assert log.read(log.log_end_offset - 1, 1 << 20) is not None  # the active segment
    assert open_files(tmp_path)[".index"] == per_mapping(1)
    end = log.log_end_offset
    log.close()
    assert open_files(tmp_path) == Counter()

    # as after a clean shutdown: nothing past the recovery point to rescan
    reopened = PartitionLog(tmp_path / "t-0", config, recovery_point=end)
    assert len(reopened.local_log.segments) == segments
    assert open_files(tmp_path) == Counter({".log": segments})
    assert len(read_all(reopened)) == 30
    assert open_files(tmp_path)[".log"] == segments
    reopened.close()


def test_a_partition_of_one_segment_holds_one_descriptor(tmp_path):
    config = LogConfig(index_interval_bytes=1)  # index entries in every partition
    logs = [PartitionLog(tmp_path / f"t-{p}", config, recovery_point=0) for p in range(300)]
    for log in logs:
        fill(log, 2)
        log.flush()
        assert log.read(1, 1 << 20) is not None
        assert log.local_log.offset_for_timestamp(1001) is not None
    assert open_files(tmp_path) == Counter({".log": 300})
    for log in logs:
        log.close()
    assert open_files(tmp_path) == Counter()
