"""Agent throughput: tail -> memory channel -> broker, and UDP loss at a fixed rate.

    .venv/bin/python -m bench.bench_agent                 # 1M lines, 10 s of UDP
    .venv/bin/python -m bench.bench_agent --lines 3000000 --udp-seconds 30

Starts a local broker (tests.procs.BrokerProcess) and `logflume agent run`
subprocesses. Tail cases: the log file (realistic nginx combined lines from
spark_etl.loggen, ~200 bytes) is written before the agent starts with
`start_at: beginning`; the clock runs from agent start until the sink's
`events_out` counter reaches the line count (so every line was acknowledged by the
broker). Agent CPU seconds and peak RSS come from /proc. UDP: a sender process
paces datagrams at `--udp-rate`; loss = sent - delivered to the broker.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.agent.agentproc import AgentProcess  # noqa: E402
from tests.procs import BrokerProcess, free_port  # noqa: E402

TAIL = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      logs: {{type: tail, paths: ["{logs}/*.log"], start_at: beginning, channels: [c],
             read_chunk_bytes: 1048576, batch_size: 5000{interceptors}}}
    channels:
      c: {{type: memory, capacity: 200000, byte_capacity: 256MiB}}
    sinks:
      k: {{type: broker, channel: c, topic: {topic}, bootstrap_servers: "{bootstrap}",
          enable_idempotence: {idem}, format: {fmt}, batch_events: 20000, linger_ms: 20}}
"""

UDP = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      udp: {{type: udp, listen: "127.0.0.1:{port}", channels: [c]}}  # default rcvbuf_bytes
    channels:
      c: {{type: memory, capacity: 200000}}
    sinks:
      k: {{type: broker, channel: c, topic: udp, format: raw, bootstrap_servers: "{bootstrap}",
          enable_idempotence: {idem}}}
"""


def proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds, peak RSS bytes) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return cpu, int(line.split()[1]) * 1024
    return cpu, 0


def write_log(path: Path, n: int) -> int:
    from spark_etl.loggen import lines

    start = datetime(2024, 10, 10, tzinfo=UTC)
    sample = [line.encode() + b"\n" for line in lines(start, start + timedelta(hours=1), 20_000)]
    size = 0
    with open(path, "wb") as f:
        for i in range(0, n, len(sample)):
            chunk = b"".join(sample[: min(len(sample), n - i)])
            f.write(chunk)
            size += len(chunk)
    return size


def wait_out(agent: AgentProcess, n: int, limit: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if (agent.metric("logflume_agent_sink_events_out_total", component="k") or 0) >= n:
            return time.monotonic() - start
        time.sleep(0.05)
    raise TimeoutError(f"not all {n} lines delivered in {limit}s")


def tail_case(tmp: Path, broker: BrokerProcess, n: int, parsed: bool, idem: str, run: int):
    case = tmp / f"tail-{'json' if parsed else 'raw'}-{run}"
    logs = case / "logs"
    logs.mkdir(parents=True)
    size = write_log(logs / "access.log", n)
    text = TAIL.format(
        logs=logs,
        topic=f"bench-{case.name}",
        bootstrap=broker.bootstrap,
        idem=idem,
        fmt="json" if parsed else "raw",
        interceptors=", interceptors: [{type: nginx}]" if parsed else "",
    )
    agent = AgentProcess(case, text)
    t0 = time.monotonic()
    agent.start()
    try:
        wait_out(agent, n, 600)
        elapsed = time.monotonic() - t0
        cpu, rss = proc_stats(agent.proc.pid)
    finally:
        agent.stop()
    return {
        "lines/s": n / elapsed,
        "MiB/s": size / elapsed / 2**20,
        "cpu_s": cpu,
        "rss_mib": rss / 2**20,
    }


def udp_sender(port: int, rate: int, seconds: float, out) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"udp datagram %09d " + b"x" * 150
    start = time.monotonic()
    sent = 0
    total = int(rate * seconds)
    while sent < total:
        due = int((time.monotonic() - start) * rate)
        while sent < min(due, total):
            sock.sendto(payload % sent, ("127.0.0.1", port))
            sent += 1
        time.sleep(0.001)
    out.put(sent)


def udp_case(tmp: Path, broker: BrokerProcess, rate: int, seconds: float, idem: str):
    port = free_port()
    case = tmp / "udp"
    case.mkdir()
    agent = AgentProcess(case, UDP.format(port=port, bootstrap=broker.bootstrap, idem=idem)).start()
    try:
        time.sleep(0.5)
        queue = multiprocessing.Queue()
        sender = multiprocessing.Process(target=udp_sender, args=(port, rate, seconds, queue))
        sender.start()
        sender.join()
        sent = queue.get()
        deadline = time.monotonic() + 30
        delivered = 0
        while time.monotonic() < deadline:
            delivered = agent.metric("logflume_agent_sink_events_out_total", component="k") or 0
            if delivered >= sent:
                break
            time.sleep(0.2)
        dropped = agent.metric("logflume_agent_source_events_dropped_total", component="udp") or 0
        cpu, rss = proc_stats(agent.proc.pid)
    finally:
        agent.stop()
    return {
        "sent": sent,
        "delivered": int(delivered),
        "lost": sent - int(delivered),
        "dropped_by_channel": int(dropped),
        "cpu_s": cpu,
        "rss_mib": rss / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--udp-rate", type=int, default=50_000)
    parser.add_argument("--udp-seconds", type=float, default=10)
    parser.add_argument("--idempotence", default="false", help="true needs InitProducerId")
    parser.add_argument("--cases", default="raw,json,udp")
    args = parser.parse_args()
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp_s:
        tmp = Path(tmp_s)
        broker = BrokerProcess(tmp / "broker").start()
        try:
            for parsed, name in ((False, "raw"), (True, "json")):
                if name not in cases:
                    continue
                results = [
                    tail_case(tmp, broker, args.lines, parsed, args.idempotence, r)
                    for r in range(args.runs)
                ]
                med = {k: statistics.median(r[k] for r in results) for k in results[0]}
                print(
                    f"tail {name}: {args.lines} lines x {args.runs} runs, median: "
                    f"{med['lines/s']:,.0f} lines/s, {med['MiB/s']:.1f} MiB/s, "
                    f"agent CPU {med['cpu_s']:.1f} s ({med['cpu_s'] / args.lines * 1e6:.1f} s per M lines), "
                    f"peak RSS {med['rss_mib']:.0f} MiB; all: "
                    + ", ".join(f"{r['lines/s']:,.0f}" for r in results)
                )
            if "udp" in cases:
                r = udp_case(tmp, broker, args.udp_rate, args.udp_seconds, args.idempotence)
                print(f"udp {args.udp_rate}/s for {args.udp_seconds:.0f} s: {r}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
