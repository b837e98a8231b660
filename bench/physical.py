"""The machine's physical limits, measured in the same run as the benchmarks.

    .venv/bin/python -m bench.physical [--mib 1024] [--socket-mib 4096]

1. Disk write bandwidth: `dd if=/dev/zero of=FILE bs=1M count=N conv=fdatasync` in
   the directory the benchmarks write to (the system temp dir): MiB/s including the
   final fdatasync, i.e. what the disk sustains, not the page cache.
2. Loopback socket copy bandwidth between two processes: a sender process writes
   1 MiB buffers to a TCP connection on 127.0.0.1 as fast as it can, this process
   receives them into one preallocated buffer (`recv_into`); MiB/s over N MiB.

Both are upper bounds for a broker on this machine: produce cannot persist faster
than the disk (over the long run), and a client cannot send or fetch faster than a
loopback copy. Median of `--repeat` runs each.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time

CHUNK = 1 << 20


def dd_write(mib: int, directory: str | None = None) -> float:
    """MiB/s of dd writing `mib` MiB of zeros with a final fdatasync."""
    fd, path = tempfile.mkstemp(prefix="bench-dd-", dir=directory)
    os.close(fd)
    try:
        t0 = time.perf_counter()
        result = subprocess.run(
            ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "conv=fdatasync"],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        elapsed = time.perf_counter() - t0
    finally:
        os.unlink(path)
    # dd's own figure: "... bytes (...) copied, 1.234 s, 870 MB/s"; prefer its seconds
    m = re.search(r"copied, ([\d.,]+) s", result.stderr)
    seconds = float(m.group(1).replace(",", ".")) if m else elapsed
    return mib / seconds


def _sender(port: int, mib: int) -> None:
    buf = b"\x00" * CHUNK
    with socket.create_connection(("127.0.0.1", port)) as s:
        for _ in range(mib):
            s.sendall(buf)


def socket_copy(mib: int) -> float:
    """MiB/s of a TCP stream over loopback from another process into this one."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(30)
        port = server.getsockname()[1]
        proc = multiprocessing.get_context("spawn").Process(target=_sender, args=(port, mib))
        proc.start()
        conn, _ = server.accept()
        with conn:
            conn.settimeout(60)
            buf = bytearray(CHUNK)
            view = memoryview(buf)
            total, want = 0, mib * CHUNK
            t0 = time.perf_counter()
            while total < want:
                n = conn.recv_into(view)
                if n == 0:
                    break
                total += n
            elapsed = time.perf_counter() - t0
        proc.join(30)
    if total < want:
        raise RuntimeError(f"socket copy: got {total} of {want} bytes")
    return total / CHUNK / elapsed


def measure(disk_mib: int, socket_mib: int, repeat: int) -> dict:
    disk, sock = [], []
    for i in range(repeat):
        disk.append(dd_write(disk_mib))
        sock.append(socket_copy(socket_mib))
        print(
            f"  repeat {i + 1}/{repeat}: dd {disk[-1]:,.0f} MiB/s, loopback {sock[-1]:,.0f} MiB/s",
            flush=True,
        )
    return {"disk": statistics.median(disk), "socket": statistics.median(sock)}


def figures(mode: str) -> list[dict]:
    disk_mib, socket_mib, repeat = {
        "quick": (256, 1024, 1),
        "default": (1024, 4096, 3),
        "full": (4096, 8192, 3),
    }[mode]
    r = measure(disk_mib, socket_mib, repeat)
    return [
        {
            "area": "physical",
            "metric": f"disk write, dd bs=1M count={disk_mib} conv=fdatasync ({tempfile.gettempdir()})",
            "value": r["disk"],
            "unit": "MiB/s",
            "detail": f"median of {repeat}; bounds sustained produce: "
            f"~{r['disk'] * 2**20 / 100 / 1e6:.1f} M uncompressed 100-byte records/s",
        },
        {
            "area": "physical",
            "metric": f"loopback TCP copy between two processes, {socket_mib} MiB in 1 MiB sends",
            "value": r["socket"],
            "unit": "MiB/s",
            "detail": f"median of {repeat}; one Python receiver doing recv_into and nothing else",
        },
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024, help="MiB written by dd")
    ap.add_argument("--socket-mib", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    r = measure(args.mib, args.socket_mib, args.repeat)
    print(f"disk write (dd, fdatasync): {r['disk']:,.0f} MiB/s")
    print(f"loopback socket copy:       {r['socket']:,.0f} MiB/s")


if __name__ == "__main__":
    main()
