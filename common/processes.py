"""Whether a process is still running, for the launchers that stop the processes they
started and the test labs that sweep what a killed test left behind."""

import os
from pathlib import Path


def running(pid: int) -> bool:
    """Neither gone nor a zombie waiting for its parent to reap it."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
