"""Durable small-file writes shared by every package (broker metadata and checkpoints,
producer snapshots, agent positions and channel checkpoints).

One recipe, so a crash or power cut leaves either the old or the new file, never a
torn one: write a temporary file beside the target, fsync it, rename it over the
target, fsync the directory so the rename itself is durable.
"""

import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, data: bytes | str, *, hidden_tmp: bool = False) -> None:
    """Replace `path` with `data` all or nothing (see the module docstring).
    `hidden_tmp` names the temporary file with a leading dot, for directories that
    other programs list and read (Spark and pyarrow skip hidden files)."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode()
    tmp = path.with_name(("." if hidden_tmp else "") + path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        tmp.unlink(missing_ok=True)  # e.g. ENOSPC: do not leave a torn file holding space
        raise
    os.replace(tmp, path)
    fsync_dir(path.parent)
