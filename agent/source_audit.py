"""The agent's source tier of the audit (`agent-source`, common/audit.py): per source,
host and minute, how many lines the source read, how many of them its interceptors
filtered out and how many a parser flagged unparsable (kept and shipped, header
`parse_error`). Counts only: no record value exists yet to hash.

The minute here is the agent's clock when the source handed the lines over: a line's
own time is known only once a parser read it, and never for a line filtered out
before. Near a minute's edge a line can therefore count in the next minute here and
in its own minute at the other tiers; this tier is shown beside them, never held to
them (common/audit.py `reconcile` compares the tiers after the agent only).

The runtime counts (`SourceTally.count`, in each source's emit path: constant work per
batch, plus a look at each kept event's headers when the source has interceptors,
for `parse_error`);
the first sink that publishes the audit and reads one of the source's channels
publishes the totals with its own (`take_dirty`, `restore`), as running totals under
a writer of this run, like the sink tier. Until then they are in memory only: a
killed agent loses what it counted since its last publish (the lines themselves are
in the channel or read again), which is one more reason this tier decides nothing.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

from common.audit import KEEP_S, MINUTE_MS

Key = tuple[str, int]  # (host, minute start in epoch ms)


@dataclasses.dataclass
class SourceCounts:
    read: int = 0
    filtered: int = 0
    unparsable: int = 0


class SourceTally:
    """Running totals of one source; event loop only."""

    def __init__(self, source: str):
        self.source = source
        self.writer_run = uuid.uuid4().hex[:12]
        self.totals: dict[Key, SourceCounts] = {}
        self.dirty: set[Key] = set()
        self._next_evict = time.monotonic() + 60

    def count(self, host: str, read: int, kept: int, unparsable: int, now_ms: int) -> None:
        """A batch of `read` lines of `host`, `kept` of them passed the interceptors,
        `unparsable` of those flagged by a parser; read at `now_ms`."""
        key = (host, now_ms - now_ms % MINUTE_MS)
        counts = self.totals.get(key)
        if counts is None:
            counts = self.totals[key] = SourceCounts()
        counts.read += read
        counts.filtered += read - kept
        counts.unparsable += unparsable
        self.dirty.add(key)
        self._evict()

    def take_dirty(self) -> dict[Key, SourceCounts]:
        """The totals changed since the last take (copies); they are clean until
        `restore` gives back those whose publication failed."""
        taken = {k: dataclasses.replace(self.totals[k]) for k in self.dirty if k in self.totals}
        self.dirty = set()
        return taken

    def restore(self, keys) -> None:
        self.dirty |= {k for k in keys if k in self.totals}

    def _evict(self) -> None:
        """Drop totals older than KEEP_S (looked at once a minute); a later line of
        such a minute starts the bucket again under a new writer run."""
        if time.monotonic() < self._next_evict:
            return
        self._next_evict = time.monotonic() + 60
        horizon = int((time.time() - KEEP_S) * 1000)
        old = [k for k in self.totals if k[1] < horizon]
        if old:
            for k in old:
                del self.totals[k]
                self.dirty.discard(k)
            self.writer_run = uuid.uuid4().hex[:12]
