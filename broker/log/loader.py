"""Opening a partition directory: leftovers, segment list, crash recovery.

After a clean shutdown every segment is trusted (indexes are only sanity-checked and
the last segment's end is found from its last index entry). After a crash, segments
from the one holding the recovery point onwards are rescanned batch by batch (CRC and
offsets checked, indexes rebuilt); the first bad batch truncates its segment and
every later segment is deleted, as the data after a corrupt point cannot be trusted.
Earlier segments were fsynced before the recovery point passed them; they are only
rescanned when an index is missing or fails its sanity check (a torn `.txnindex`
included; a missing one just means no aborted transaction). A rescanned segment's
transaction index is rebuilt by the partition log afterwards (`txn_index_stale`).
"""

import logging
import re
from pathlib import Path

from broker.log.common import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
)
from broker.log.config import LogConfig
from broker.log.index import CorruptIndexError
from broker.log.segment import LogSegment
from broker.log.txn_index import TXN_INDEX_SUFFIX
from common.fsutil import TMP_SUFFIX

log = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")


def new_segment(
    dir: Path, base: int, config: LogConfig, now_ms: int, suffix: str = ""
) -> LogSegment:
    return LogSegment(
        dir,
        base,
        config.index_interval_bytes,
        config.segment_index_bytes,
        active=True,
        created_ms=now_ms,
        suffix=suffix,
    )


def _clean_leftovers(dir: Path) -> set[int]:
    """Delete temp/cleaned files and indexes without a log; return the log bases."""
    bases = set()
    others = []
    for p in dir.iterdir():
        if p.name.endswith((CLEANED_SUFFIX, TMP_SUFFIX)):
            log.info("deleting leftover %s", p)
            p.unlink(missing_ok=True)
            continue
        m = _SEGMENT_FILE.match(p.name)
        if m and m.group(2) == "log":
            bases.add(int(m.group(1)))
        elif m:
            others.append((int(m.group(1)), p))
    for base, p in others:
        if base not in bases:
            p.unlink(missing_ok=True)
    return bases


def _indexes_missing(dir: Path, base: int) -> bool:
    return not all(
        (dir / f"{base:020d}{suffix}").exists() for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
    )


def load_segments(
    dir: Path, config: LogConfig, recovery_point: int, clean_shutdown: bool, now_ms: int
) -> list[LogSegment]:
    bases = sorted(_clean_leftovers(dir))
    if not bases:
        return [new_segment(dir, 0, config, now_ms)]
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        last = i == len(bases) - 1
        missing = _indexes_missing(dir, base)
        seg = LogSegment(
            dir,
            base,
            config.index_interval_bytes,
            config.segment_index_bytes,
            active=last,
            created_ms=now_ms,
        )
        segments.append(seg)
        next_base = bases[i + 1] if not last else None
        unflushed = not clean_shutdown and (next_base is None or next_base > recovery_point)
        if unflushed or missing or not _trusted(seg, config, last):
            truncated = seg.recover()
            if truncated:
                log.warning("%s: truncated %d bytes of invalid data", seg.log_path, truncated)
                if not last:
                    _delete_files(dir, bases[i + 1 :])
                    break
            if not last:
                seg.finish()
        if next_base is not None:
            seg.next_offset = next_base
    return segments


def _delete_files(dir: Path, bases: list[int]) -> None:
    for base in bases:
        log.warning("deleting segment %020d: it follows corrupt data", base)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            (dir / f"{base:020d}{suffix}").unlink(missing_ok=True)


def _trusted(seg: LogSegment, config: LogConfig, last: bool) -> bool:
    try:
        seg.index.sanity_check(max(seg.size, 1))
        seg.time_index.sanity_check()
        seg.txn_index.sanity_check()
        if seg.size > 2 * config.index_interval_bytes + 2**16 and seg.index.entries == 0:
            raise CorruptIndexError(f"{seg.index.path.name}: empty for a {seg.size}-byte log")
        if last:
            seg.load_tail()
    except (CorruptIndexError, ValueError) as e:
        log.warning("%s: rebuilding indexes: %s", seg.log_path, e)
        return False
    return True
