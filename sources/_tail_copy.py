"""Rotation recovery for the tail source: where the unread bytes of a lost file went.

Two rotations take a file away from the tail before it read it to its end (it was
behind: backpressure, a slow broker, or the agent was down). Both are looked for in
the file's directory, whether or not the names there match the watched paths.

Copytruncate. logrotate copies the live file (`access.log` -> `access.log.1`), then
truncates it to 0. A tail that sees the truncation would lose the unread tail; those
bytes are in the copy (`find_copy`): a regular file other than the live one, not
already followed, whose first bytes have the fingerprint of the truncated generation
(see `_tail_positions`; at least MIN_CONTENT_MATCH bytes of it, as for every
content-only match) and which holds at least the bytes already read. Several
candidates (a backup copy made by hand): the most recently modified wins, as
logrotate's copy is the newest. Lines written to the live file between logrotate's
copy and its truncation are in neither file: logrotate itself loses them.

Rename while the agent is down. A running tail follows a renamed file by its
descriptor, but after a restart the saved path names the new file. The saved file
is then looked for by its identity (`find_renamed`: the same device and inode, with
the same fingerprint, so a reused inode is not taken for it); when it is not there
(deleted, or compressed to a new inode), by its content, as a copy is.

An uncompressed file found is read on from the saved or truncated generation's
position (see `FileTable._recover` and `FileTable.recover_renamed`). A compressed
one (`compress` without `delaycompress`: gzipped and deleted before the tail looked)
is only reported: its unread bytes are abandoned, with a warning.

Owned by the tail source's read loop (one task); not thread-safe.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import stat
import zlib

from sources._tail_positions import FP_MAX, MIN_CONTENT_MATCH, fingerprint_matches


@dataclasses.dataclass(slots=True)
class Copy:
    """A copy found by `find_copy`. `fd` is open (the caller owns it) for an
    uncompressed copy, None for a compressed one."""

    path: str
    key: tuple[int, int]
    size: int
    head: bytes
    fd: int | None


def find_copy(
    directory: str,
    fp_len: int,
    fp_crc: int,
    offset: int,
    known: set[tuple[int, int]],
) -> Copy | None:
    """The copy, in `directory`, of the generation with fingerprint (fp_len, fp_crc)
    read up to `offset`; files whose (dev, ino) is in `known` are skipped (the live
    file, and every file the tail already follows). An uncompressed copy is
    preferred to a compressed one."""
    if fp_len < MIN_CONTENT_MATCH:
        return None
    plain, compressed = [], []
    for entry, st in _regular_files(directory):
        if (st.st_dev, st.st_ino) in known:
            continue
        if entry.name.endswith(".gz"):
            compressed.append((st.st_mtime, entry.path, st))
        elif st.st_size >= offset:
            plain.append((st.st_mtime, entry.path, st))
    for group, is_gz in ((plain, False), (compressed, True)):
        for _, path, st in sorted(group, reverse=True):
            found = _open_match(path, st, fp_len, fp_crc, is_gz)
            if found is not None:
                return found
    return None


def find_renamed(directory: str, key: tuple[int, int], fp_len: int, fp_crc: int) -> Copy | None:
    """The regular file with identity `key` (dev, ino) in `directory`, opened, when
    its first bytes still have the fingerprint; None when it is not there."""
    for entry, st in _regular_files(directory):
        if (st.st_dev, st.st_ino) == key:
            return _open_match(entry.path, st, fp_len, fp_crc, False)
    return None


def _regular_files(directory: str) -> list[tuple[os.DirEntry, os.stat_result]]:
    """(entry, lstat) of each regular file in `directory`; none when it cannot be
    listed, and files that vanish or cannot be stat'ed while listing are skipped."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    found = []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((entry, st))
    return found


def _open_match(
    path: str, st: os.stat_result, fp_len: int, fp_crc: int, is_gz: bool
) -> Copy | None:
    """`path` as a Copy when its first bytes have the fingerprint, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if is_gz:
            with gzip.GzipFile(fileobj=open(fd, "rb", closefd=False)) as gz:
                head = gz.read(FP_MAX)
        else:
            head = os.pread(fd, FP_MAX, 0)
    except (OSError, EOFError, zlib.error):  # gzip.BadGzipFile is an OSError
        head = b""
    if not fingerprint_matches(head, fp_len, fp_crc):
        os.close(fd)
        return None
    if is_gz:
        os.close(fd)
        return Copy(path, (st.st_dev, st.st_ino), st.st_size, head, None)
    return Copy(path, (st.st_dev, st.st_ino), st.st_size, head, fd)
