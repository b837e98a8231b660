"""Leader epoch cache: which offset each leader epoch started at.

Persisted as `leader-epoch-checkpoint` in the partition directory (Kafka's format:
`0`, count, `epoch startOffset` lines). Followers use `end_offset_for` answers
(OffsetForLeaderEpoch) to find where their log diverges from the leader's.
"""

import logging
from collections.abc import Callable
from pathlib import Path

from broker.log.checkpoint import CheckpointError, read_lines, write_lines

log = logging.getLogger(__name__)

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED = -1


class LeaderEpochCache:
    """Owned by one PartitionLog (its event loop); not thread-safe. Every change is
    written through to the checkpoint file."""

    def __init__(self, dir: Path, log_end_offset: Callable[[], int]):
        self.path = Path(dir) / FILE_NAME
        self._log_end_offset = log_end_offset
        try:
            self.entries = [(int(e), int(o)) for e, o in read_lines(self.path, 2)]
        except (CheckpointError, ValueError) as e:
            log.warning("ignoring unreadable %s: %s", self.path, e)
            self.entries = []

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED

    def _save(self) -> None:
        write_lines(self.path, self.entries)

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; entries it contradicts (same
        or later epoch, or a start at or after it) are dropped."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry {epoch} {start_offset}")
        if self.entries:
            last_epoch, last_start = self.entries[-1]
            if epoch == last_epoch and start_offset >= last_start:
                return
        before = self.entries
        self.entries = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        self.entries.append((epoch, start_offset))
        try:
            self._save()
        except OSError:
            self.entries = before  # memory stays what the file says; the append fails
            raise

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers: the end of the largest
        epoch <= requested is the start of the next higher epoch (or the log end for
        the latest epoch); (-1, -1) when unknown."""
        if requested_epoch == UNDEFINED or not self.entries:
            return UNDEFINED, UNDEFINED
        if requested_epoch == self.latest_epoch:
            return requested_epoch, self._log_end_offset()
        higher = next(((e, o) for e, o in self.entries if e > requested_epoch), None)
        if higher is None:
            return UNDEFINED, UNDEFINED
        floor = [e for e, _ in self.entries if e <= requested_epoch]
        return (floor[-1] if floor else requested_epoch), higher[1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after `end_offset` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop epochs that ended before it and
        move the start of the epoch containing it up to it."""
        before = [(e, o) for e, o in self.entries if o <= start_offset]
        if not before:
            return
        kept = [(before[-1][0], start_offset)] + [
            (e, o) for e, o in self.entries if o > start_offset
        ]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def clear(self) -> None:
        self.entries = []
        self._save()
