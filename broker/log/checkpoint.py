"""Kafka's text checkpoint files: a version line `0`, a count line, then one entry per
line. Used for `recovery-point-offset-checkpoint` and `cleaner-offset-checkpoint`
(entries `topic partition offset`) and `leader-epoch-checkpoint` (`epoch offset`).
Writes are atomic (temp file, fsync, rename); a torn or garbled file reads as
CheckpointError so the caller can fall back to a full recovery.
"""

from pathlib import Path

from common.fsutil import atomic_write

VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file does not parse."""


def read_lines(path: Path, fields: int) -> list[list[str]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    try:
        if int(lines[0]) != VERSION:
            raise CheckpointError(f"{path}: unknown version {lines[0]}")
        count = int(lines[1])
        rows = [line.split() for line in lines[2 : 2 + count]]
    except (IndexError, ValueError) as e:
        raise CheckpointError(f"{path}: {e}") from e
    if len(rows) != count or any(len(r) != fields for r in rows):
        raise CheckpointError(f"{path}: expected {count} rows of {fields} fields")
    return rows


def write_lines(path: Path, rows: list[tuple]) -> None:
    body = [str(VERSION), str(len(rows))] + [" ".join(str(x) for x in r) for r in rows]
    atomic_write(path, "\n".join(body) + "\n")


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset} from an offset checkpoint file."""
    try:
        return {(t, int(p)): int(o) for t, p, o in read_lines(path, 3)}
    except ValueError as e:
        raise CheckpointError(f"{path}: {e}") from e


def write_offsets(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    write_lines(path, [(t, p, o) for (t, p), o in sorted(offsets.items())])
