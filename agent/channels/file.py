"""The `file` channel: a durable, bounded channel backed by a write-ahead log.

Put: the batch becomes one lz4-compressed WAL record (format in wal.py), appended
to the current segment with one write(); it is then committed and takeable. Once
the record is on disk (after fsync when `fsync: true`, the default; fsyncs of
concurrent puts are grouped), the events' Acks are settled: a durable channel makes
the source's position safe to advance, so a tail source moves on as soon as its
lines are in the WAL, not when the broker acknowledges them. That is the
difference from the memory channel, which settles only when the sink commits.

Take: whole records are taken from the head (events cached in memory up to
`cache_bytes`, otherwise read back from the segment). Rollback returns them to the
head in order. Commit marks them done; the checkpoint (`checkpoint.json`: every
seq below `floor` is committed) is written atomically after commits, at most once
per `checkpoint_interval` (50 ms), and segments wholly below the floor are deleted.

Restart: segments are scanned from the checkpoint floor; every record at or above
the floor is takeable again (so events a sink committed after the last checkpoint,
and those it had delivered but not yet committed, may be delivered twice:
at-least-once).

Source marks. A record also stores the marks of its events' Acks (`Ack.mark`: the
tail's file offset after them), and the channel keeps the last mark per source and
key once it is durable (after the record's fsync, as the Acks are settled); the
checkpoint saves them too, since segments are deleted. `held_marks` hands them to
the source at a (re)start: it resumes after what the channel already holds, so a
line is never both replayed from the log and read again from its file (which, with
the replay of what was committed after the last checkpoint, made three copies). A torn or corrupt tail is cut off and
quarantined with a log line (wal.repair) instead of refusing to start; a lost or
unreadable checkpoint means replaying all segments still on disk.

Bounds: `capacity` events and `byte_capacity` bytes of live records (uncommitted,
on disk); put waits when full. Disk use may exceed the byte bound by up to one
segment until the floor passes it.

Full disk (ENOSPC, EDQUOT): a record is written with pwrite at the segment's end and
a failed write is cut back, so the WAL never holds a torn record between good ones.
`put` then waits and retries (backpressure: the source stops reading, its position
does not move) with one log line per 10 s and the gauge
`logflume_agent_channel_disk_full` at 1; `offer` refuses. A checkpoint that cannot
be written does not stop segment deletion: segments wholly below the committed floor
are deleted anyway (a restart may then replay more, never less), which is how a
channel that filled its own disk while the sink was down gets its space back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import os
import time
import uuid
from collections import deque

import orjson

from agent.api import Channel, Context, Duration, Event, Size, TakeBatch, register
from agent.channels import wal
from agent.channels.memory import ChannelMetrics
from common.aio import within
from common.backoff import Backoff
from common.fsutil import atomic_write

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_RETRY_MIN_S, _RETRY_MAX_S, _LOG_EVERY_S = 0.05, 1.0, 10.0
IDENTITY_FILE = "channel-id"  # see Channel.identity


@register("channel", "file")
class FileChannel(Channel):
    """Owned by the runtime; used by tasks of one event loop (not thread-safe).
    `open()` must be awaited before use and `close()` at the end."""

    @dataclasses.dataclass
    class Config:
        directory: str | None = None  # where the WAL is kept; null: the channel's state directory
        capacity: int = 1_000_000  # most events stored and not yet committed
        byte_capacity: Size = Size(1 << 30)  # most bytes of uncommitted records on disk
        segment_bytes: Size = Size(64 << 20)  # a new WAL segment file starts past this size
        cache_bytes: Size = Size(32 << 20)  # events kept in memory for takes; beyond: read back
        fsync: bool = True  # fsync puts before acknowledging them (false: a host crash loses some)
        checkpoint_interval: Duration = Duration(0.05)  # least time between two checkpoints

    @classmethod
    def validate(cls, config) -> list[str]:
        errors = []
        d = config.directory
        if d is not None:
            probe = d if os.path.isdir(d) else os.path.dirname(os.path.abspath(d))
            if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
                errors.append(f"directory: {d!r} is not a writable directory")
        if config.capacity < 1 or config.byte_capacity < 1:
            errors.append("capacity: capacity and byte_capacity must be positive")
        return errors

    def __init__(self, config, context: Context):
        super().__init__(config, context)
        self.dir = config.directory or context.state_dir
        self.log = context.log
        self.metrics = ChannelMetrics(context, config.capacity, config.byte_capacity)
        self.disk_full = context.metrics.gauge(
            "logflume_agent_channel_disk_full",
            "1 while the channel's directory has no space and puts wait",
            component=context.name,
        )
        self._disk_full = False  # the last append failed for want of space
        self.disk_full.set(0)  # the series outlives a channel replaced by a reload
        self._last_disk_log = -_LOG_EVERY_S
        self._ready: deque[wal.RecordRef] = deque()
        self._taken: dict[int, wal.RecordRef] = {}  # first_seq -> ref
        self._events = 0
        self._bytes = 0
        self._cached = 0
        self._next_seq = 0
        self._floor = 0
        self._saved_floor = -1
        self._segments: dict[int, int] = {}  # first seq -> read fd
        self._write_fd = -1
        self._write_segment = 0
        self._write_pos = 0
        self._unsynced: list = []  # acks waiting for fsync
        self._unsynced_marks: list[tuple[int, list]] = []  # (seq, marks) waiting for fsync
        self._marks = wal.Marks()  # of durable records: what sources need not send again
        self._identity: str | None = None  # read or made when the channel opens
        self._marks_changed = False  # since the last checkpoint
        self._space = asyncio.Event()
        self._data = asyncio.Event()
        self._progress = asyncio.Event()  # the floor or the marks moved: checkpoint soon
        self._sync_wanted = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    # ---- lifecycle ------------------------------------------------------------

    async def open(self) -> None:
        await asyncio.to_thread(self._recover)
        self._roll()
        self._tasks = [
            asyncio.create_task(self._syncer(), name=f"{self.context.name}.fsync"),
            asyncio.create_task(self._checkpointer(), name=f"{self.context.name}.checkpoint"),
        ]

    async def close(self) -> None:
        self.closed = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._sync_now()
        try:
            self._write_checkpoint()
        except OSError as exc:
            self.log.error(
                "file channel %s: checkpoint not written at close (%s); the next start "
                "replays from the previous one",
                self.context.name,
                exc,
            )
        for fd in self._segments.values():
            os.close(fd)
        self._segments.clear()
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    @property
    def identity(self) -> str | None:
        return self._identity

    def _load_identity(self) -> str:
        """The channel's identity (`Channel.identity`), made with its directory."""
        path = os.path.join(self.dir, IDENTITY_FILE)
        try:
            with open(path, encoding="ascii") as f:
                return f.read().strip()
        except FileNotFoundError:
            identity = uuid.uuid4().hex
            atomic_write(path, identity)
            return identity

    def _recover(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        self._identity = self._load_identity()
        floor, marks = self._read_checkpoint()
        self._marks = wal.Marks(marks)
        names = sorted(
            n for n in os.listdir(self.dir) if n.startswith("wal-") and n.endswith(".log")
        )
        for name in names:
            segment = int(name[4:-4])
            path = os.path.join(self.dir, name)
            result = wal.scan(path, segment, segment)
            if result.problem is not None:
                where, moved = wal.repair(
                    path, result.good_bytes, os.path.join(self.dir, "quarantine")
                )
                self.log.warning(
                    "file channel %s: %s in %s at byte %d; cut there, %d bytes quarantined to %s",
                    self.context.name,
                    result.problem,
                    name,
                    result.good_bytes,
                    moved,
                    where,
                )
            for seq, marks in result.marks:
                self._marks.add(seq, marks)
            live = [r for r in result.records if r.first_seq + r.count > floor]
            if result.records:
                self._next_seq = max(
                    self._next_seq, result.records[-1].first_seq + result.records[-1].count
                )
            if not live:
                os.unlink(path)
                continue
            self._segments[segment] = os.open(path, os.O_RDONLY)
            for ref in live:
                self._ready.append(ref)
                self._events += ref.count
                self._bytes += ref.size
        self._next_seq = max(self._next_seq, floor)
        self._floor = self._ready[0].first_seq if self._ready else self._next_seq
        if self._ready:
            self.log.info(
                "file channel %s: %d events (%d bytes) recovered from %d segments",
                self.context.name,
                self._events,
                self._bytes,
                len(self._segments),
            )
        self._gauges()

    def _read_checkpoint(self) -> tuple[int, list]:
        """(floor, marks as `wal.Marks.to_json`) of checkpoint.json."""
        path = os.path.join(self.dir, "checkpoint.json")
        try:
            with open(path, "rb") as f:
                doc = orjson.loads(f.read())
            return int(doc["floor"]), list(doc.get("marks", []))
        except FileNotFoundError:
            return 0, []
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self.log.warning(
                "file channel %s: unreadable checkpoint (%s); replaying every segment",
                self.context.name,
                exc,
            )
            return 0, []

    def _save_floor(self, floor: int, marks: list) -> None:
        """Atomically replace checkpoint.json (thread-safe: touches no shared state)."""
        doc = {"floor": floor, "marks": marks}
        atomic_write(os.path.join(self.dir, "checkpoint.json"), orjson.dumps(doc))

    def held_marks(self, source: str) -> dict:
        return self._marks.of(source)

    def _drop_segments(self, floor: int | None = None) -> None:
        """Delete segments wholly below `floor` (default: the saved floor; never the
        one being written)."""
        floor = self._saved_floor if floor is None else floor
        segments = sorted(self._segments)
        for segment, following in zip(segments, segments[1:], strict=False):
            if following > floor:
                break
            if segment != self._write_segment:
                os.close(self._segments.pop(segment))
                os.unlink(os.path.join(self.dir, wal.segment_name(segment)))

    def _write_checkpoint(self) -> None:
        if self._floor != self._saved_floor or self._marks_changed:
            self._marks_changed = False
            self._save_floor(self._floor, self._marks.to_json())
            self._saved_floor = self._floor
            self._drop_segments()

    def _roll(self) -> None:
        if self._write_fd >= 0:
            self._sync_now()
            os.close(self._write_fd)
        self._write_segment = self._next_seq
        path = os.path.join(self.dir, wal.segment_name(self._write_segment))
        self._write_fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._write_pos = os.fstat(self._write_fd).st_size
        if self._write_segment not in self._segments:
            self._segments[self._write_segment] = os.open(path, os.O_RDONLY)

    # ---- put ------------------------------------------------------------------

    def pending(self) -> int:
        return self._events

    def _fits(self, n: int, size: int) -> bool:
        if self._events == 0:
            return True
        cfg = self.config
        return self._events + n <= cfg.capacity and self._bytes + size <= cfg.byte_capacity

    def _write(self, record: bytes) -> None:
        """Write `record` at the end of the segment, all or nothing: a partial write
        (ENOSPC half way) is cut back, so the next record starts at a record boundary."""
        pos = self._write_pos
        try:
            view = memoryview(record)
            while view:
                n = os.pwrite(self._write_fd, view, pos)
                view = view[n:]
                pos += n
        except OSError:
            try:
                os.ftruncate(self._write_fd, self._write_pos)
            except OSError:
                pass  # the next record overwrites the torn bytes (pwrite at _write_pos)
            raise

    def _append(self, events: list[Event], record: bytes, marks: list[list]) -> None:
        if self._write_pos >= self.config.segment_bytes:
            self._roll()
        self._write(record)
        ref = wal.RecordRef(
            self._write_segment, self._write_pos, len(record), self._next_seq, len(events)
        )
        self._write_pos += len(record)
        self._next_seq += len(events)
        if self._cached < self.config.cache_bytes:
            ref.events = [Event(e.body, e.headers, e.record, None, e.time) for e in events]
            self._cached += len(record)
        self._ready.append(ref)
        self._events += len(events)
        self._bytes += len(record)
        self.metrics.put.inc(len(events))
        self._gauges()
        acks = [e.ack for e in events if e.ack is not None]
        if self.config.fsync:
            self._unsynced.extend(acks)
            if marks:
                self._unsynced_marks.append((ref.first_seq, marks))
            self._sync_wanted.set()
        else:
            self._durable(acks, [(ref.first_seq, marks)] if marks else [])
        self._data.set()

    async def put(self, events: list[Event]) -> None:
        if not events:
            return
        marks = wal.record_marks(events)
        record = wal.encode_record(self._next_seq, events, marks)
        retry = Backoff(_RETRY_MIN_S, _RETRY_MAX_S)
        while True:
            while not self._fits(len(events), len(record)):
                self._space.clear()
                await self._space.wait()
            if record[wal.HEADER.size : wal.HEADER.size + 8] != self._next_seq.to_bytes(
                8, "little"
            ):
                record = wal.encode_record(self._next_seq, events, marks)  # another put first
            if not self._try_append(events, record, marks):
                self._space.clear()
                try:  # a commit may free segments; else the space comes back from outside
                    await within(self._space.wait(), retry.next())
                except TimeoutError:
                    pass
                continue
            if self._disk_full:
                self._disk_full = False
                self.disk_full.set(0)
                self.log.warning("file channel %s: space again, puts resumed", self.context.name)
            return

    def offer(self, events: list[Event]) -> bool:
        if not events:
            return True
        marks = wal.record_marks(events)
        record = wal.encode_record(self._next_seq, events, marks)
        if not self._fits(len(events), len(record)):
            self.metrics.refused.inc(len(events))
            return False
        if not self._try_append(events, record, marks):
            self.metrics.refused.inc(len(events))
            return False
        return True

    def _try_append(self, events: list[Event], record: bytes, marks: list[list]) -> bool:
        """Append; False (after `_on_disk_full`) when the disk is full."""
        try:
            self._append(events, record, marks)
        except OSError as exc:
            if exc.errno not in DISK_FULL:
                raise
            self._on_disk_full(exc)
            return False
        return True

    def _on_disk_full(self, exc: OSError) -> None:
        """Gauge up, one log line per 10 s, and delete what committed data allows."""
        self._disk_full = True
        self.disk_full.set(1)
        now = time.monotonic()
        if now - self._last_disk_log >= _LOG_EVERY_S:
            self._last_disk_log = now
            self.log.error(
                "file channel %s: cannot write to %s (%s); puts wait until there is space",
                self.context.name,
                self.dir,
                exc,
            )
        self._drop_segments(self._floor)

    def _durable(self, acks: list, marks: list[tuple[int, list]]) -> None:
        """Records are on disk: their marks count as held, their Acks are settled."""
        for seq, m in marks:
            self._marks.add(seq, m)
            self._marks_changed = True
            self._progress.set()
        for ack in acks:
            ack.settle()

    def _sync_now(self) -> None:
        acks, self._unsynced = self._unsynced, []
        marks, self._unsynced_marks = self._unsynced_marks, []
        if self._write_fd >= 0:
            os.fsync(self._write_fd)
        self._durable(acks, marks)

    async def _syncer(self) -> None:
        while True:
            await self._sync_wanted.wait()
            self._sync_wanted.clear()
            acks, self._unsynced = self._unsynced, []
            marks, self._unsynced_marks = self._unsynced_marks, []
            fd = os.dup(self._write_fd)  # a roll may close the original meanwhile
            try:
                await asyncio.to_thread(os.fsync, fd)
            except BaseException as exc:
                self._unsynced[:0] = acks  # not durable yet: close() syncs and settles
                self._unsynced_marks[:0] = marks  # them, or the next round tries again
                if not isinstance(exc, OSError):
                    raise
                self.log.error("file channel %s: fsync failed: %s", self.context.name, exc)
                await asyncio.sleep(_RETRY_MAX_S)
                self._sync_wanted.set()
                continue
            finally:
                os.close(fd)
            self._durable(acks, marks)

    async def _checkpointer(self) -> None:
        """Checkpoint after commits (and new durable marks), at most once per
        `checkpoint_interval`: the commits of that time go in one write."""
        while True:
            await self._progress.wait()
            self._progress.clear()
            floor = self._floor
            if floor != self._saved_floor or self._marks_changed:
                self._marks_changed = False
                try:
                    await asyncio.to_thread(self._save_floor, floor, self._marks.to_json())
                except OSError as exc:
                    # Committed segments go anyway: a restart replays more, never less.
                    self._marks_changed = True  # (its marks are saved next time)
                    self._progress.set()  # try again after the interval
                    self.log.warning(
                        "file channel %s: checkpoint not written (%s)", self.context.name, exc
                    )
                    self._drop_segments(floor)
                else:
                    self._saved_floor = floor
                    self._drop_segments()
            await asyncio.sleep(float(self.config.checkpoint_interval))

    # ---- take -----------------------------------------------------------------

    async def take(self, max_events: int, max_wait: float, whole_puts: bool = False) -> TakeBatch:
        """Whole records only (so whole puts, whatever `whole_puts` says)."""
        self.check_open("open a take")
        if not self._ready:
            self._data.clear()
            try:
                await within(self._data.wait(), max_wait)
            except TimeoutError:
                return _FileTake(self, [], [])
        refs, events, n = [], [], 0
        while self._ready and (n == 0 or n + self._ready[0].count <= max_events):
            ref = self._ready.popleft()
            self._taken[ref.first_seq] = ref
            refs.append(ref)
            events.extend(ref.events if ref.events is not None else self._read(ref))
            n += ref.count
        return _FileTake(self, refs, events)

    def discard_below(self, seq: int) -> int:
        refs = []
        while self._ready and self._ready[0].first_seq + self._ready[0].count <= seq:
            ref = self._ready.popleft()
            self._taken[ref.first_seq] = ref
            refs.append(ref)
        if refs:
            self._committed(refs)
        return sum(r.count for r in refs)

    def _read(self, ref: wal.RecordRef) -> list[Event]:
        data = os.pread(self._segments[ref.segment], ref.size, ref.offset)
        return wal.decode_record(data)

    def _committed(self, refs: list[wal.RecordRef]) -> None:
        for ref in refs:
            del self._taken[ref.first_seq]
            self._events -= ref.count
            self._bytes -= ref.size
            if ref.events is not None:
                self._cached -= ref.size
                ref.events = None
        heads = [self._ready[0].first_seq] if self._ready else []
        self._floor = min([*self._taken, *heads], default=self._next_seq)
        self.metrics.committed.inc(sum(r.count for r in refs))
        self._gauges()
        self._space.set()
        self._progress.set()

    def _returned(self, refs: list[wal.RecordRef]) -> None:
        for ref in refs:
            del self._taken[ref.first_seq]
        self._ready.extendleft(reversed(refs))
        self.metrics.rolled_back.inc(sum(r.count for r in refs))
        self._data.set()

    def _gauges(self) -> None:
        self.metrics.events.set(self._events)
        self.metrics.bytes.set(self._bytes)


class _FileTake(TakeBatch):
    __slots__ = ("refs",)
    channel: FileChannel

    def __init__(self, channel: FileChannel, refs: list, events: list[Event]):
        super().__init__(channel, events)
        self.refs = refs

    @property
    def end_seq(self) -> int | None:
        last = self.refs[-1] if self.refs else None
        return last.first_seq + last.count if last is not None else None

    async def _commit(self) -> None:
        self.channel._committed(self.refs)

    async def _rollback(self) -> None:
        self.channel._returned(self.refs)
