"""Look at the process table through /proc: who descends from whom, who is still alive."""

import os
import time


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgid) of a live process, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2])


def alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie waiting to be reaped."""
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(root: int) -> set[int]:
    """Live processes below `root` in the process tree."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        st = _stat(pid)
        if st is not None:
            children.setdefault(st[1], []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found and alive(child):
                found.add(child)
                todo.append(child)
    return found


def in_groups(pgids: set[int]) -> set[int]:
    """Live processes whose process group is one of `pgids`."""
    out = set()
    for pid in all_pids():
        st = _stat(pid)
        if st is not None and st[2] in pgids and st[0] not in ("Z", "X"):
            out.add(pid)
    return out


def pgid(pid: int) -> int | None:
    st = _stat(pid)
    return st[2] if st else None


def wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    """Wait until none of `pids` is alive; return those still alive at the timeout."""
    deadline = time.monotonic() + timeout
    left = {p for p in pids if alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if alive(p)}
    return left
