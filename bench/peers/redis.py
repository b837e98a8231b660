"""A private redis-server for peer benchmarks, and redis-benchmark XADD runs against it.

The server runs on a free loopback port with append-only persistence
(`--appendonly yes --appendfsync everysec`, the durable Redis setting closest to a
log broker's page-cache writes) in a temporary directory, and is stopped afterwards.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from common.ports import free_port, wait_for_port


class RedisServer:
    """A redis-server child process; use as a context manager."""

    def __init__(self):
        if shutil.which("redis-server") is None or shutil.which("redis-benchmark") is None:
            raise RuntimeError("redis-server/redis-benchmark missing: run `make system-deps`")
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="bench-redis-"))
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
                "--dir",
                str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, 10, self.proc)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def xadd_rate(
        self, records: int, value_size: int = 100, pipeline: int = 64, clients: int = 4
    ) -> float:
        """Records/s of redis-benchmark XADD with a `value_size`-byte field, pipelined."""
        value = "x" * value_size
        out = subprocess.run(
            [
                "redis-benchmark",
                "-p",
                str(self.port),
                "-n",
                str(records),
                "-P",
                str(pipeline),
                "-c",
                str(clients),
                "--csv",
                "XADD",
                "bench",
                "*",
                "f",
                value,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        ).stdout
        for line in out.splitlines():
            if line.startswith('"XADD'):
                return float(line.split('","')[1].strip('"'))
        raise RuntimeError(f"unexpected redis-benchmark output: {out!r}")
