"""LogManager: every partition log of one data directory.

Startup reads `recovery-point-offset-checkpoint`, `cleaner-offset-checkpoint` and
`log-start-offset-checkpoint` (log starts that DeleteRecords moved inside a segment),
notes whether the `.kafka_cleanshutdown` marker is present (then nothing is rescanned),
opens every `<topic>-<partition>` directory, and removes the marker so that a later
crash is not mistaken for a clean stop. `close` flushes everything, writes the
checkpoints and then the marker. The server calls `checkpoint_recovery_points`,
`run_retention`, `run_cleaner`, `flush_dirty` and `remove_expired_producers`
periodically.
"""

import errno
import logging
import os
import resource
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from broker.log.checkpoint import CheckpointError, read_offsets, write_offsets
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog, parse_dir_name
from common.fsutil import fsync_dir

log = logging.getLogger(__name__)

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_SUFFIX = "-delete"
# Open files per new partition: its .log (the active segment's indexes are in memory,
# neither open nor mapped: broker/log/index.py).
FILES_PER_PARTITION = 1
FILE_HEADROOM = 256  # kept free for connections, checkpoints and segment rolls
CLOSE_THREADS = 8  # logs closed at once at shutdown (LogManager.close)


class LogManager:
    """Owned by the server's event loop; not thread-safe.

    `topic_config(topic)` (optional) gives the stored config of a topic found on disk
    at startup; without it, or when it returns None, the default config is used and
    the server can call `update_config` later.
    """

    def __init__(
        self,
        data_dir: Path,
        default_config: LogConfig,
        clock=time.time,
        topic_config: Callable[[str], LogConfig | None] | None = None,
    ):
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.default_config = default_config
        self._clock = clock
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery = self._read(RECOVERY_POINT_FILE)
        cleaner = self._read(CLEANER_FILE)
        starts = self._read(LOG_START_FILE)
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        for d in sorted(self.data_dir.iterdir()):
            if not d.is_dir():
                continue
            if d.name.endswith(DELETE_SUFFIX):
                shutil.rmtree(d, ignore_errors=True)
                continue
            try:
                topic, part = parse_dir_name(d.name)
            except ValueError:
                continue
            config = (topic_config(topic) if topic_config else None) or default_config
            self._logs[(topic, part)] = PartitionLog(
                d,
                config,
                recovery.get((topic, part), 0),
                clock,
                clean_shutdown=clean,
                cleaner_checkpoint=cleaner.get((topic, part), 0),
                log_start_offset=starts.get((topic, part), 0),
            )
        if clean:
            marker.unlink()
            fsync_dir(self.data_dir)

    def _read(self, name: str) -> dict[tuple[str, int], int]:
        try:
            return read_offsets(self.data_dir / name)
        except (CheckpointError, OSError) as e:
            log.warning("ignoring unreadable %s: %s", name, e)
            return {}

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> Iterable[PartitionLog]:
        return list(self._logs.values())

    def reserve_files(self, partitions: int) -> None:
        """Raise OSError(EMFILE) if opening `partitions` new partitions would pass this
        process's open-file limit. Checked before a create starts: running out half
        way means undoing what was made, which takes seconds for thousands."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            used = len(os.listdir("/proc/self/fd"))
        except OSError:  # no procfs: the create itself will tell
            return
        need = partitions * FILES_PER_PARTITION
        if soft != resource.RLIM_INFINITY and used + need + FILE_HEADROOM > soft:
            raise OSError(
                errno.EMFILE,
                f"{partitions} partition(s) need about {need} open files, and {used} of"
                f" this process's limit of {soft} are in use (raise it: ulimit -n,"
                " LimitNOFILE)",
            )

    def create(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        sync_dir: bool = True,
    ) -> PartitionLog:
        """Open (creating if needed) the log of topic-partition. `sync_dir=False`
        leaves the data directory's fsync (the new directory's entry) to the caller's
        `sync_data_dir`, once for the many partitions of a topic."""
        config = config or self.default_config
        existing = self._logs.get((topic, partition))
        if existing is not None:
            existing.update_config(config)
            return existing
        dir = self._dir_for(topic, partition)
        plog = PartitionLog(dir, config, 0, self._clock)
        if sync_dir:
            self.sync_data_dir()
        self._logs[(topic, partition)] = plog
        return plog

    def sync_data_dir(self) -> None:
        """fsync the data directory: the partition directories created are durable."""
        fsync_dir(self.data_dir)

    def _dir_for(self, topic: str, partition: int) -> Path:
        if (
            not topic
            or topic in (".", "..")
            or any(c in topic for c in "/\\\0")
            or not isinstance(partition, int)
            or partition < 0
        ):
            raise ValueError(f"invalid topic partition {topic!r}-{partition!r}")
        dir = self.data_dir / f"{topic}-{partition}"
        if dir.resolve().parent != self.data_dir.resolve():
            raise ValueError(f"topic {topic!r} would escape the data directory")
        return dir

    def delete(self, topic: str, partition: int) -> None:
        plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return
        plog.release()
        doomed = plog.dir.with_name(f"{plog.dir.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        os.rename(plog.dir, doomed)
        fsync_dir(self.data_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        try:
            self.checkpoint_recovery_points()
        except OSError as e:  # a full disk: the next checkpoint drops the entry
            log.debug(
                "recovery points not checkpointed after deleting %s-%d: %s", topic, partition, e
            )

    def checkpoint_recovery_points(self) -> None:
        points = {(p.topic, p.partition): p.recovery_point for p in self._logs.values()}
        write_offsets(self.data_dir / RECOVERY_POINT_FILE, points)

    def checkpoint_log_starts(self) -> None:
        """Log starts that are not a segment's base offset (DeleteRecords moved them)."""
        points = {
            (p.topic, p.partition): p.log_start_offset
            for p in self._logs.values()
            if p.log_start_offset != p.segments[0].base_offset
        }
        write_offsets(self.data_dir / LOG_START_FILE, points)

    def checkpoint_cleaner(self) -> None:
        points = {
            (p.topic, p.partition): p.cleaner_state.checkpoint
            for p in self._logs.values()
            if p.config.compact
        }
        write_offsets(self.data_dir / CLEANER_FILE, points)

    def run_retention(self) -> int:
        return sum(p.delete_old_segments() for p in self._logs.values())

    def remove_expired_producers(self) -> int:
        """Forget, in every log, the producers idle past producer.id.expiration.ms
        (the server runs it every producer.id.expiration.check.interval.ms, as Kafka
        does); returns how many went."""
        return sum(p.remove_expired_producers() for p in self._logs.values())

    def run_cleaner(self) -> None:
        compacted = [p for p in self._logs.values() if p.config.compact]
        for p in compacted:
            p.compact()
        if compacted:
            self.checkpoint_cleaner()

    def flush_dirty(self, observe: Callable[[float], None] | None = None) -> None:
        """Flush the logs whose flush.ms is due; `observe` gets each flush's seconds."""
        for p in self._logs.values():
            started = time.perf_counter()
            if p.flush_if_due() and observe is not None:
                observe(time.perf_counter() - started)

    def close(self) -> bool:
        """Flush and close every log, write checkpoints, then the clean-shutdown marker.
        True if all of it was written.

        The logs close on `CLOSE_THREADS` threads, as Kafka's shutdown does on its
        recovery threads: each close is mostly fsyncs, which wait on the disk without
        the GIL, and a file system commits concurrent fsyncs together (6,000 partitions
        closed one after another took a minute). A log fsyncs only what changed since
        its last flush. A write that fails here (a full disk) is logged and the marker
        left out, so the next start recovers the logs from the last good checkpoints
        instead of trusting files this close could not finish; the other logs still
        close."""
        logs = list(self._logs.values())
        with ThreadPoolExecutor(CLOSE_THREADS, thread_name_prefix="log-close") as pool:
            errors = list(pool.map(_close_log, logs))
        failed = [
            f"close {p.topic}-{p.partition}: {e}" for p, e in zip(logs, errors, strict=True) if e
        ]
        for write in (
            self.checkpoint_recovery_points,
            self.checkpoint_cleaner,
            self.checkpoint_log_starts,
        ):
            try:
                write()
            except OSError as e:
                failed.append(f"{write.__name__}: {e}")
        self._logs.clear()
        if failed:
            log.error(
                "logs closed with storage errors, next start will run recovery: %s",
                "; ".join(failed),
            )
            return False
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        with open(marker, "w") as f:
            os.fsync(f.fileno())
        fsync_dir(self.data_dir)
        return True


def _close_log(p: PartitionLog) -> OSError | None:
    """Flush and close one log (on a close thread); the storage error, if any."""
    try:
        p.close()
    except OSError as e:
        return e
    return None
