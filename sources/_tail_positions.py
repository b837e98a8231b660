"""Saved positions of the tail source: file identity, delivered offsets, the position file.

Identity. A file is the pair (device, inode) plus a fingerprint: the CRC-32 of its
first `fp_len` bytes, `fp_len` = min(size, FP_MAX). A file shorter than FP_MAX has
a provisional fingerprint that firms up as it grows (the old prefix must still
match). The inode alone is not enough: a deleted file's inode is reused by the next
file created, which must then be read from 0. The fingerprint alone is not enough
either (two files may start alike), so content-only matches (a copy made by
copytruncate, a file seen under a new inode after a restart) need at least
MIN_CONTENT_MATCH bytes of fingerprint.

Positions. Offsets advance only from acknowledgements. Each emitted batch gets a
slot in its file's `DeliveryTracker` holding the offset the batch ends at; the
batch's Ack callback marks the slot done, and the tracker's `delivered` offset moves
to the end of the longest fully-done prefix of slots, so acks arriving out of order
(batches spread over several channels) never move it past an unsettled batch.

Persistence. One `SavedPosition` per known file (identity, delivered offset, path,
when last seen, largest size seen). `PositionStore.save` writes them to a temp file,
fsyncs it, renames it over `positions.json` and fsyncs the directory, so a crash
leaves either the old or the new file. A file that does not parse is renamed aside
with a clear error in the log and treated as empty: the source starts, never loops.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable

import orjson

from common.fsutil import atomic_write

FP_MAX = 1024
MIN_CONTENT_MATCH = 128
STATE_FILE = "positions.json"


def fingerprint_matches(head: bytes, fp_len: int, fp_crc: int) -> bool:
    return len(head) >= fp_len and zlib.crc32(head[:fp_len]) == fp_crc


class DeliveryTracker:
    """In-order completion of the batches emitted from one file generation.

    Owned by one `TailedFile`; its callbacks run on the agent's event loop (the
    runtime settles acks there), so no lock is needed.
    """

    __slots__ = ("delivered", "_slots", "_on_advance")

    def __init__(self, offset: int, on_advance: Callable[[], None] | None = None):
        self.delivered = offset
        self._slots: deque[list] = deque()
        self._on_advance = on_advance  # told when `delivered` moves (the source saves soon)

    def slot(self, end: int) -> Callable[[], None]:
        """Reserve the next slot, ending at `end`; returns the Ack callback for it."""
        slot = [end, False]
        self._slots.append(slot)
        slots = self._slots

        def done() -> None:
            slot[1] = True
            if not slots[0][1]:
                return
            while slots and slots[0][1]:
                self.delivered = slots.popleft()[0]
            if self._on_advance is not None:
                self._on_advance()

        return done

    @property
    def in_flight(self) -> int:
        return len(self._slots)


@dataclasses.dataclass(frozen=True, slots=True)
class SavedPosition:
    """One entry of the position file (field names are its JSON keys, in order)."""

    dev: int
    ino: int
    fp_len: int
    fp_crc: int
    offset: int  # delivered: every line before it was acknowledged
    path: str
    seen: float  # wall-clock time the file was last found at a watched path
    copy: bool = False  # read on to its end wherever it is: a copytruncate copy, a renamed file
    size: int = 0  # largest size seen: what a file lost unread abandons is counted from

    @classmethod
    def from_json(cls, entry: dict) -> SavedPosition:
        pos = cls(
            int(entry["dev"]),
            int(entry["ino"]),
            int(entry["fp_len"]),
            int(entry["fp_crc"]),
            int(entry["offset"]),
            str(entry["path"]),
            float(entry.get("seen", time.time())),
            bool(entry.get("copy", False)),
            int(entry.get("size", 0)),
        )
        if pos.fp_len < 0 or pos.fp_len > FP_MAX or pos.offset < 0:
            raise ValueError(f"bad entry {entry!r}")
        return pos


def mark_key(key: tuple[int, int]) -> str:
    """The key of a file's marks (`Ack.mark`): its device and inode."""
    return f"{key[0]}:{key[1]}"


def resume_positions(
    saved: list[SavedPosition] | None,
    held: list[dict[str, list]],
    present: Callable[[int, int, str], bool],
    now: float,
) -> list[SavedPosition] | None:
    """`saved` raised to what every durable channel of the source already holds.

    `held` has one dict per channel: mark key -> [offset, fp_len, fp_crc, path], the
    end of the last lines of that file it holds or delivered. A file counts as held
    up to the least offset of the channels (all must have it). A saved entry moves
    up only within the same generation (same fingerprint, or a longer one over a
    provisional one); a file with no saved entry (found after the last save) gets one
    when `present(dev, ino, path)` says it is still there. A wrong guess only makes
    the scan read the file from 0: more duplicates, never a loss.
    """
    if not held:
        return saved
    out = list(saved or [])
    index = {(p.dev, p.ino): i for i, p in enumerate(out)}
    for key in set.intersection(*(set(h) for h in held)):
        offset, fp_len, fp_crc, path = min((h[key] for h in held), key=lambda v: v[0])
        dev, ino = (int(part) for part in key.split(":"))
        i = index.get((dev, ino))
        if i is None:
            if present(dev, ino, path):
                out.append(SavedPosition(dev, ino, fp_len, fp_crc, offset, path, now, size=offset))
            continue
        pos = out[i]
        same = (fp_len, fp_crc) == (pos.fp_len, pos.fp_crc)
        firmer = pos.fp_len < fp_len <= FP_MAX and pos.fp_len < FP_MAX
        if offset > pos.offset and (same or firmer):
            out[i] = dataclasses.replace(
                pos, offset=offset, fp_len=fp_len, fp_crc=fp_crc, size=max(pos.size, offset)
            )
    return out if saved is not None or out else None


class PositionStore:
    """The position file of one tail source. `load` runs on the read loop's task;
    `save` may run from worker threads and is serialised by a lock."""

    def __init__(self, state_dir: str, log: logging.Logger):
        self._lock = threading.Lock()
        self._written = 0
        self.dir = state_dir
        self.path = os.path.join(state_dir, STATE_FILE)
        self.log = log

    def load(self) -> list[SavedPosition] | None:
        """Saved positions, or None when there is no usable position file (first run)."""
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        try:
            doc = orjson.loads(raw)
            if not isinstance(doc, dict) or doc.get("version") != 1:
                raise ValueError("not a version 1 position document")
            return [SavedPosition.from_json(e) for e in doc["files"]]
        except (ValueError, KeyError, TypeError) as exc:
            aside = f"{self.path}.corrupt-{int(time.time())}"
            self.log.error(
                "tail: position file %s is corrupt (%s); moved it to %s and starting "
                "with no saved positions",
                self.path,
                exc,
                aside,
            )
            try:
                os.replace(self.path, aside)
            except OSError as move_exc:
                self.log.error("tail: could not move corrupt position file: %s", move_exc)
            return None

    def save(self, entries: list[SavedPosition], seq: int) -> None:
        """Write `entries` unless a save with a higher `seq` already happened."""
        with self._lock:
            if seq <= self._written:
                return
            self._save(entries)
            self._written = seq

    def _save(self, entries: list[SavedPosition]) -> None:
        os.makedirs(self.dir, exist_ok=True)
        atomic_write(self.path, orjson.dumps({"version": 1, "files": entries}))
