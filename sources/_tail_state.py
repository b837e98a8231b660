"""File identity, delivered positions and their persistence, for the tail source.

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

Persistence. `PositionStore.save` writes the delivered offsets to a temp file,
fsyncs it, renames it over `positions.json` and fsyncs the directory, so a crash
leaves either the old or the new file. A file that does not parse is renamed aside
with a clear error in the log and treated as empty: the source starts, never loops.
"""

from __future__ import annotations

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

    __slots__ = ("delivered", "_slots")

    def __init__(self, offset: int):
        self.delivered = offset
        self._slots: deque[list] = deque()

    def slot(self, end: int) -> Callable[[], None]:
        """Reserve the next slot, ending at `end`; returns the Ack callback for it."""
        slot = [end, False]
        self._slots.append(slot)
        slots = self._slots

        def done() -> None:
            slot[1] = True
            while slots and slots[0][1]:
                self.delivered = slots.popleft()[0]

        return done

    @property
    def in_flight(self) -> int:
        return len(self._slots)


class TailedFile:
    """One generation of one file: identity, read state and delivery tracking.

    Owned by the tail source's read loop (single task). `fd` is None while the file
    is closed (a "ghost": rotated away, deleted, idle, or known only from the
    position file); a ghost can be revived when its file is seen again.
    """

    __slots__ = (
        "dev",
        "ino",
        "fp_len",
        "fp_crc",
        "path",
        "fd",
        "read_offset",
        "tracker",
        "splitter",
        "headers",
        "gone",
        "eof_since",
        "last_seen",
        "idle_closed",
        "copy_of",
        "held",
        "gz",
        "sealed",
        "emitted_end",
        "path_checked",
        "head",
    )

    def __init__(self, dev: int, ino: int, fp_len: int, fp_crc: int, path: str, offset: int):
        self.dev, self.ino = dev, ino
        self.fp_len, self.fp_crc = fp_len, fp_crc
        self.path = path
        self.fd: int | None = None
        self.read_offset = offset
        self.tracker = DeliveryTracker(offset)
        self.splitter = None
        self.headers: dict[str, str] = {}
        self.gone = False  # no longer found at any watched path
        self.eof_since: float | None = None
        self.last_seen = time.time()
        self.idle_closed = False
        self.copy_of: TailedFile | None = None  # copytruncate copy waiting on its original
        self.held = None  # multiline event being assembled: [lines, start offset, size, when]
        self.gz = None  # gzip.GzipFile for a compressed rotated file
        self.sealed = False  # a compressed file read to its end: never reopened
        self.emitted_end = offset  # end offset of the last batch handed to emit
        self.path_checked = 0.0  # monotonic time of the last "still at its path?" check
        self.head: bytes | None = None  # first bytes seen in this run (None if loaded)

    @property
    def key(self) -> tuple[int, int]:
        return (self.dev, self.ino)

    def matches_head(self, head: bytes) -> bool:
        return fingerprint_matches(head, self.fp_len, self.fp_crc)

    def firm_up(self, head: bytes) -> None:
        """Extend a provisional fingerprint once the file is longer."""
        if self.head is None or len(head) > len(self.head):
            self.head = head[:FP_MAX]
        if len(head) > self.fp_len:
            self.fp_len = min(len(head), FP_MAX)
            self.fp_crc = zlib.crc32(head[: self.fp_len])

    def to_json(self) -> dict:
        return {
            "dev": self.dev,
            "ino": self.ino,
            "fp_len": self.fp_len,
            "fp_crc": self.fp_crc,
            "offset": self.tracker.delivered,
            "path": self.path,
            "seen": self.last_seen,
        }

    @classmethod
    def from_json(cls, entry: dict) -> TailedFile:
        f = cls(
            int(entry["dev"]),
            int(entry["ino"]),
            int(entry["fp_len"]),
            int(entry["fp_crc"]),
            str(entry["path"]),
            int(entry["offset"]),
        )
        f.last_seen = float(entry.get("seen", time.time()))
        if f.fp_len < 0 or f.fp_len > FP_MAX or f.read_offset < 0:
            raise ValueError(f"bad entry {entry!r}")
        return f


class PositionStore:
    """The position file of one tail source. `load` runs on the read loop's task;
    `save` may run from worker threads and is serialised by a lock."""

    def __init__(self, state_dir: str, log: logging.Logger):
        self._lock = threading.Lock()
        self._written = 0
        self.dir = state_dir
        self.path = os.path.join(state_dir, STATE_FILE)
        self.log = log

    def load(self) -> list[TailedFile] | None:
        """Saved files, or None when there is no usable position file (first run)."""
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        try:
            doc = orjson.loads(raw)
            if not isinstance(doc, dict) or doc.get("version") != 1:
                raise ValueError("not a version 1 position document")
            return [TailedFile.from_json(e) for e in doc["files"]]
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

    def save(self, entries: list[dict], seq: int) -> None:
        """Write `entries` unless a save with a higher `seq` already happened."""
        with self._lock:
            if seq <= self._written:
                return
            self._save(entries)
            self._written = seq

    def _save(self, entries: list[dict]) -> None:
        os.makedirs(self.dir, exist_ok=True)
        atomic_write(self.path, orjson.dumps({"version": 1, "files": entries}))
