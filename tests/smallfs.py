"""A small file system of its own for disk-full tests: tmpfs, or a loop-mounted ext4
image where tmpfs cannot be mounted.

    with SmallFs(tmp_path / "mnt", size_kb=2048) as fs:
        ...            # fill fs.path until writes fail with ENOSPC
        fs.grow(8192)  # space returns

Needs root (mount), as `make test` runs in CI. `require_mount()` fails the test with
the reason when this machine cannot mount: a skip would hide a missing install step
(deploy/system-deps.sh installs mount and e2fsprogs).
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


class SmallFs:
    """One mounted small file system at `path`; a context manager that unmounts."""

    _probe: str | None = None  # "tmpfs", "ext4" or "" (cannot mount), cached

    def __init__(self, path: Path, size_kb: int):
        self.path = Path(path)
        self.size_kb = size_kb
        self.kind = ""
        self._image: Path | None = None

    @classmethod
    def available(cls, scratch: Path) -> str:
        """ "tmpfs" or "ext4" if mounting works here, else "" (cached per process)."""
        if cls._probe is None:
            probe = Path(scratch) / "smallfs-probe"
            fs = SmallFs(probe, 256)
            try:
                fs.mount()
                cls._probe = fs.kind
            except OSError:
                cls._probe = ""
            finally:
                fs.unmount()
                shutil.rmtree(probe, ignore_errors=True)
        return cls._probe

    def mount(self) -> "SmallFs":
        self.path.mkdir(parents=True, exist_ok=True)
        r = _run("mount", "-t", "tmpfs", "-o", f"size={self.size_kb}k", "tmpfs", str(self.path))
        if r.returncode == 0:
            self.kind = "tmpfs"
            return self
        if shutil.which("mkfs.ext4") is None:
            raise OSError(f"cannot mount tmpfs ({r.stderr.strip()}) and no mkfs.ext4")
        self._image = self.path.with_name(self.path.name + ".img")
        with open(self._image, "wb") as f:
            f.truncate(max(self.size_kb, 1024) * 1024)
        mk = _run("mkfs.ext4", "-q", "-F", "-m", "0", "-b", "1024", str(self._image))
        r = _run("mount", "-o", "loop", str(self._image), str(self.path))
        if mk.returncode != 0 or r.returncode != 0:
            raise OSError(f"cannot mount tmpfs or an ext4 image: {mk.stderr}{r.stderr}".strip())
        self.kind = "ext4"
        return self

    def grow(self, size_kb: int) -> None:
        """Make room: a larger tmpfs in place, or a grown ext4 image (resize2fs)."""
        if self.kind == "tmpfs":
            r = _run("mount", "-o", f"remount,size={size_kb}k", str(self.path))
        else:
            with open(self._image, "r+b") as f:
                f.truncate(size_kb * 1024)
            dev = _run("findmnt", "-n", "-o", "SOURCE", str(self.path)).stdout.strip()
            _run("losetup", "-c", dev)
            r = _run("resize2fs", dev)
        if r.returncode != 0:
            raise OSError(f"cannot grow {self.path}: {r.stderr.strip()}")
        self.size_kb = size_kb

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def unmount(self) -> None:
        if self.kind or os.path.ismount(self.path):
            _run("umount", "-l", str(self.path))
            self.kind = ""
        if self._image is not None:
            self._image.unlink(missing_ok=True)
            self._image = None

    def __enter__(self) -> "SmallFs":
        return self.mount()

    def __exit__(self, *exc) -> None:
        self.unmount()


def fill(path: Path, leave_bytes: int = 0) -> Path:
    """Write a filler file at `path` until the file system has at most `leave_bytes`
    free; returns it (delete it to give the space back)."""
    chunk = b"\0" * 65536
    filler = Path(path)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            st = os.statvfs(filler.parent)
            free = st.f_bavail * st.f_frsize
            if free <= leave_bytes:
                break
            try:
                os.write(fd, chunk[: max(1, min(len(chunk), free - leave_bytes))])
            except OSError:
                break
    finally:
        os.close(fd)
    return filler


def require_mount(scratch: Path, kind: str | None = None) -> None:
    """Fail the calling test unless this machine can mount a small file system (of
    `kind`, "tmpfs" or "ext4", when given)."""
    got = SmallFs.available(scratch)
    if not got or (kind is not None and got != kind):
        pytest.fail(
            f"cannot mount a small {kind or 'tmpfs or ext4'} file system here (got"
            f" {got or 'none'}): the disk-full tests need root and mount/e2fsprogs"
        )
