"""Agent throughput: tail -> memory channel -> broker (raw, nginx->JSON), the same
raw workload through syslog-ng, and UDP loss at a fixed rate.

    .venv/bin/python -m bench.bench_agent                 # 1M lines x 3 runs, 10 s of UDP
    .venv/bin/python -m bench.bench_agent --lines 3000000 --udp-seconds 30
    .venv/bin/python -m bench.bench_agent --cases raw,syslog-ng
    .venv/bin/python -m bench.bench_agent --cases raw,eos   # delivery: exactly_once vs at_least_once
    .venv/bin/python -m bench.bench_agent --cases host,host-noheaders   # the host record header
    .venv/bin/python -m bench.bench_agent --cases raw,noaudit,json,json-noaudit  # the audit's cost
    .venv/bin/python -m bench.bench_agent --cases json,json-anon   # anonymize_ip + strip_query

Starts a local broker (testkit.procs.BrokerProcess). One log file of realistic nginx
combined lines (spark_etl.loggen, ~190 bytes) is written once, before anything
starts. Each tail case and syslog-ng (bench/peers/syslog_ng.py, file source to its
kafka-c destination, same producer settings) follows a file of its own, empty when
the process starts: `logflume agent run` (`start_at: beginning`) or syslog-ng. Each
run does the cases one after the other (interleaved, so a load change hits all of
them); figures are medians over runs. `host` is `raw` with the source's
`add_host: true` and the sink's default `headers: [host]` (a `host` record header on
every record), `host-noheaders` the same with `headers: []`: the cost of record
headers, side by side; `noaudit` and `json-noaudit` are `raw` and `json` with the
sink's `audit: false`: the cost of the audit's counts and checksums, side by side;
`json-anon` is `json` with `anonymize_ip` (truncate) and `strip_query` after the
parser: the cost of a web host's privacy transforms, side by side with `json`.

How a case is measured (`measure`). The topic is created first, and the process
started on its empty file; once it has started up (its CPU time still for 0.3 s)
the whole log is appended to its file at once, in the kernel, and the clock runs
until the topic's high watermark (records the broker acknowledged, acks=all; polled
every 20 ms) holds every line. "lines/s" is lines over that time; "CPU s per M
lines" the process's own CPU seconds over it (all threads, from /proc), per million
lines. Both ends of that span have nothing in flight: none read yet at the start,
all acknowledged at the end, so the CPU is exactly that of the lines, whatever the
size of the run and however each process batches (syslog-ng reads up to ~300,000
lines ahead of what the broker acknowledged: an earlier clock, started at the first
record acknowledged with the whole file there from the start, left out the CPU of
what was read by then, most of a 200,000-line run). The wait before the lines come
costs nothing but a poll every 0.1 s (the tail's `poll_interval`, syslog-ng's
`follow-freq`), which also bounds the delay before reading starts. Beside them,
the whole run: "whole run" lines/s counts the start-up too (spawn to started up, plus
the span above) and its CPU includes the start-up's (Python's imports: ~0.4 CPU s
for the agent, nothing for syslog-ng). Peak RSS is VmHWM. `--threads` prints each
run's CPU per thread. UDP: a sender process paces datagrams at `--udp-rate`; loss =
sent - delivered to the broker.
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

from bench.peers.syslog_ng import SyslogNg, high_watermark  # noqa: E402
from common.ports import free_port  # noqa: E402
from testkit.agent import AgentProcess  # noqa: E402
from testkit.procs import BrokerProcess  # noqa: E402

TAIL = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      logs: {{type: tail, paths: ["{log}"], start_at: beginning, channels: [c],
             read_chunk_bytes: 1048576, batch_size: 5000{interceptors}{add_host}}}
    channels:
      c: {{type: memory, capacity: 200000, byte_capacity: 128MiB}}
    sinks:
      k: {{type: broker, channel: c, topic: {topic}, bootstrap_servers: "{bootstrap}",
          enable_idempotence: {idem}, format: {fmt}, batch_events: 20000, linger_ms: 20,
          delivery: {delivery}, transactional_id: {topic}{headers}, audit: {audit}}}
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


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a live process per thread name, threads of one name summed; the
    main thread is `main` (Python's threads all carry the program's name)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        if task.name == str(pid):
            name = "main"
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        out[name] = out.get(name, 0.0) + cpu
    return out


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


def append(src: Path, dst: Path) -> None:
    """Append the whole of `src` to `dst`, in the kernel (no copy through this process;
    copy_file_range refuses a file opened with O_APPEND, hence the seek)."""
    with open(src, "rb") as s, open(dst, "r+b") as d:
        d.seek(0, os.SEEK_END)
        left = os.fstat(s.fileno()).st_size
        while left > 0:
            left -= os.copy_file_range(s.fileno(), d.fileno(), left)


def settle(pid: int, spawned: float, quiet: float = 0.3, limit: float = 60) -> float:
    """Wait until process `pid` is done starting up (its CPU time still for `quiet`
    seconds); the seconds from `spawned` to its last CPU time before that."""
    deadline = time.monotonic() + limit
    last_cpu, last_change = proc_stats(pid)[0], time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        cpu, now = proc_stats(pid)[0], time.monotonic()
        if cpu - last_cpu > 0.011:  # more than a clock tick: still working
            last_cpu, last_change = cpu, now
        elif now - last_change >= quiet:
            return last_change - spawned
    raise TimeoutError(f"process {pid} still busy after {limit}s")


def measure(
    pid: int, count, n: int, src: Path, dst: Path, spawned: float, limit: float = 600
) -> dict:
    """Process `pid` was started at `spawned`, following the empty file `dst`: once it
    is idle (started up), append the `n` lines of `src` to `dst` and poll `count()`
    (records the broker acknowledged) until it reaches `n`. Figures of the whole run
    beside those of the work alone: see the module docstring."""
    startup = settle(pid, spawned)
    cpu0, t0 = proc_stats(pid)[0], time.monotonic()
    threads0 = thread_cpu(pid)
    append(src, dst)
    while True:
        c = count()
        now = time.monotonic()
        if c >= n:
            break
        if now - t0 > limit:
            raise TimeoutError(f"{c} of {n} lines delivered in {limit}s")
        time.sleep(0.02)
    cpu, rss = proc_stats(pid)
    threads = thread_cpu(pid)
    return {
        "lines/s": n / (now - t0),
        "cpu_s_per_M": (cpu - cpu0) / n * 1e6,
        "wall lines/s": n / (startup + now - t0),
        "cpu_s_per_M_all": cpu / n * 1e6,
        "startup_s": startup,
        "startup_cpu_s": cpu0,
        "rss_mib": rss / 2**20,
        "threads": {k: (v - threads0.get(k, 0.0)) / n * 1e6 for k, v in threads.items()},
    }


def fresh_topic(broker: BrokerProcess, topic: str):
    """Create `topic` (one partition) and return its record counter, already
    answering: the clock starts with the topic in place, for every case alike."""
    import logging

    from common.kafka_admin import ensure_topic

    ensure_topic({"bootstrap.servers": broker.bootstrap}, topic, 1, {}, logging.getLogger())
    count = high_watermark(broker.bootstrap, topic)
    deadline = time.monotonic() + 30
    while not count.ready():
        if time.monotonic() > deadline:
            count.close()
            raise TimeoutError(f"topic {topic} has no leader after 30 s")
        time.sleep(0.05)
    return count


def tail_case(tmp: Path, log: Path, n: int, broker: BrokerProcess, kind: str, idem: str, run):
    """One run of tail case `kind`: raw, json, json-anon, eos, host or host-noheaders;
    a `-noaudit` suffix (or `noaudit` alone: raw) turns the sink's audit off."""
    parsed = kind.startswith("json")
    interceptors = "{type: nginx}"
    if kind == "json-anon":
        interceptors += ", {type: anonymize_ip}, {type: strip_query}"
    case = tmp / f"tail-{kind}-{run}"
    case.mkdir(parents=True)
    followed = case / "access.log"
    followed.touch()
    topic = f"bench-{case.name}"
    text = TAIL.format(
        log=followed,
        topic=topic,
        bootstrap=broker.bootstrap,
        idem="true" if kind == "eos" else idem,
        fmt="json" if parsed else "raw",
        interceptors=f", interceptors: [{interceptors}]" if parsed else "",
        delivery="exactly_once" if kind == "eos" else "at_least_once",
        add_host=", add_host: true" if kind.startswith("host") else "",
        headers=", headers: []" if kind == "host-noheaders" else "",
        audit="false" if kind.endswith("noaudit") else "true",
    )
    agent = AgentProcess(case, text)
    count = fresh_topic(broker, topic)
    spawned = time.monotonic()
    agent.start()
    try:
        return measure(agent.proc.pid, count, n, log, followed, spawned)
    finally:
        agent.stop()
        count.close()
        followed.unlink()


def peer_case(
    tmp: Path, log: Path, n: int, broker: BrokerProcess, topic: str, idem: bool, workers: int = 1
) -> dict:
    followed = tmp / f"{topic}.log"
    followed.touch()
    count = fresh_topic(broker, topic)
    try:
        peer = SyslogNg(
            followed, broker.bootstrap, topic, linger_ms=20, idempotence=idem, workers=workers
        )
        with peer:
            assert peer.proc is not None  # started by __enter__
            try:
                return measure(peer.proc.pid, count, n, log, followed, peer.started)
            except TimeoutError:
                print(peer.output()[-2000:])
                raise
    finally:
        count.close()
        followed.unlink()


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


def report(name: str, results: list[dict], line_bytes: float, threads: bool = False) -> dict:
    med = {k: statistics.median(r[k] for r in results) for k in results[0] if k != "threads"}
    print(
        f"{name:>10}: {med['lines/s']:>9,.0f} lines/s {med['lines/s'] * line_bytes / 2**20:6.1f} MiB/s"
        f" | CPU {med['cpu_s_per_M']:5.2f} s per M lines"
        f" | whole run: {med['wall lines/s']:>9,.0f} lines/s, CPU {med['cpu_s_per_M_all']:5.2f} s"
        f" per M lines (start-up {med['startup_s']:.1f} s, {med['startup_cpu_s']:.2f} CPU s)"
        f" | peak RSS {med['rss_mib']:5.0f} MiB | runs: "
        + ", ".join(f"{r['lines/s']:,.0f} ({r['cpu_s_per_M']:.2f})" for r in results)
    )
    if threads:
        for r in results:
            busy = sorted(r["threads"].items(), key=lambda kv: -kv[1])
            print(
                " " * 12
                + "CPU s per M lines by thread: "
                + ", ".join(f"{k} {v:.2f}" for k, v in busy if v >= 0.005)
            )
    return med


def run_cases(
    n: int,
    runs: int,
    udp_rate: int,
    udp_seconds: float,
    idem: str,
    cases: list[str],
    threads: bool = False,
) -> tuple[dict[str, dict], dict | None, float]:
    """(medians per tail case, the UDP result or None, bytes per line); prints as it goes."""
    print(f"load average at start: {os.getloadavg()}", flush=True)
    udp = None
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp_s:
        tmp = Path(tmp_s)
        log = tmp / "access.log"
        size = write_log(log, n)
        line_bytes = size / n
        print(f"{n:,} lines, {size / 2**20:.1f} MiB ({line_bytes:.0f} bytes/line), {runs} runs")
        broker = BrokerProcess(tmp / "broker").start()
        results: dict[str, list[dict]] = {c: [] for c in cases if c != "udp"}
        try:
            for run in range(runs):
                for case in results:
                    if case == "syslog-ng":
                        topic = f"bench-syslog-ng-{run}"
                        r = peer_case(tmp, log, n, broker, topic, idem == "true")
                    else:
                        r = tail_case(tmp, log, n, broker, case, idem, run)
                    results[case].append(r)
            med = {case: report(case, rs, line_bytes, threads) for case, rs in results.items()}
            if "raw" in med and "syslog-ng" in med:
                ours, peer = med["raw"], med["syslog-ng"]
                print(
                    f"logflume/syslog-ng: {ours['lines/s'] / peer['lines/s']:.2f}x lines/s, "
                    f"{ours['cpu_s_per_M'] / peer['cpu_s_per_M']:.2f}x CPU s per M lines"
                    f" (whole runs: {ours['wall lines/s'] / peer['wall lines/s']:.2f}x,"
                    f" {ours['cpu_s_per_M_all'] / peer['cpu_s_per_M_all']:.2f}x)"
                )
            if "host" in med and "host-noheaders" in med:
                ratio = med["host"]["lines/s"] / med["host-noheaders"]["lines/s"]
                print(f"host header sent / not sent: {ratio:.3f}x lines/s")
            for on, off in (("raw", "noaudit"), ("json", "json-noaudit")):
                if on in med and off in med:
                    ratio = med[on]["lines/s"] / med[off]["lines/s"]
                    print(f"audit on / off ({on}): {ratio:.3f}x lines/s")
            if "json" in med and "json-anon" in med:
                ratio = med["json-anon"]["lines/s"] / med["json"]["lines/s"]
                print(f"anonymize_ip + strip_query / nginx alone: {ratio:.3f}x lines/s")
            if "raw" in med and "eos" in med:
                ratio = med["eos"]["lines/s"] / med["raw"]["lines/s"]
                print(f"exactly_once/at_least_once (raw): {ratio:.2f}x lines/s")
            if "udp" in cases:
                udp = udp_case(tmp, broker, udp_rate, udp_seconds, idem)
                print(f"udp {udp_rate}/s for {udp_seconds:.0f} s: {udp}")
        finally:
            broker.stop()
    print(f"load average at end: {os.getloadavg()}", flush=True)
    return med, udp, line_bytes


VECTOR = "Vector, file to TCP: 76.7 MiB/s on 2 vCPUs (published)"


def figures(mode: str) -> list[dict]:
    n, runs, udp_seconds = {
        "quick": (500_000, 1, 3.0),  # enough that the 0.1 s poll is not the run
        "default": (1_000_000, 3, 30.0),
        "full": (1_000_000, 3, 30.0),
    }[mode]
    cases = [
        "raw", "noaudit", "syslog-ng", "json", "json-noaudit", "host", "host-noheaders", "udp",
    ]  # fmt: skip
    med, udp, line_bytes = run_cases(n, runs, 50_000, udp_seconds, "true", cases)
    peer = med["syslog-ng"]
    peer_text = (
        f"syslog-ng file → kafka-c: {peer['lines/s']:,.0f} lines/s,"
        f" {peer['cpu_s_per_M']:.2f} CPU s per M lines"
        f" (whole run {peer['wall lines/s']:,.0f} lines/s, {peer['cpu_s_per_M_all']:.2f})"
    )
    setup = f"{n:,} nginx lines of {line_bytes:.0f} B, median of {runs}, acks=all, lz4, idempotent"
    raw, js, host, bare = med["raw"], med["json"], med["host"], med["host-noheaders"]
    raw_off, js_off = med["noaudit"], med["json-noaudit"]
    out = [
        {
            "area": "agent",
            "metric": "tail → memory channel → broker, raw lines",
            "value": raw["lines/s"],
            "unit": "lines/s",
            "target": ">= 500000",
            "reference": "issue 39 (issue 5: >= 250000)",
            "peer": peer_text,
            "detail": f"{setup}; CPU {raw['cpu_s_per_M']:.2f} s per M lines, peak RSS"
            f" {raw['rss_mib']:.0f} MiB; whole run, start-up included:"
            f" {raw['wall lines/s']:,.0f} lines/s, CPU {raw['cpu_s_per_M_all']:.2f} s per M lines",
        },
        {
            "area": "agent",
            "metric": "tail → broker, raw, in MiB/s",
            "value": raw["lines/s"] * line_bytes / 2**20,
            "unit": "MiB/s",
            "reference": VECTOR,
        },
        {
            "area": "agent",
            "metric": "logflume / syslog-ng, lines/s (raw tail, same file, same run)",
            "value": raw["lines/s"] / peer["lines/s"],
            "unit": "ratio",
            "peer": peer_text,
        },
        {
            "area": "agent",
            "metric": "logflume / syslog-ng, CPU seconds per million lines",
            "value": raw["cpu_s_per_M"] / peer["cpu_s_per_M"],
            "unit": "ratio",
            "target": "<= 0.6",
            "reference": "issue 39",
            "detail": "from the lines' arrival to their last acknowledgement (bench_agent's"
            f" docstring); whole runs, start-up included:"
            f" {raw['cpu_s_per_M_all'] / peer['cpu_s_per_M_all']:.2f}",
        },
        {
            "area": "agent",
            "metric": "tail → nginx parser → broker, JSON",
            "value": js["lines/s"],
            "unit": "lines/s",
            "target": ">= 200000",
            "reference": "issue 39 (issue 5: >= 100000)",
            "detail": f"CPU {js['cpu_s_per_M']:.2f} s per M lines, peak RSS {js['rss_mib']:.0f} MiB",
        },
        {
            "area": "agent",
            "metric": "record headers: lines/s with the host header sent / not sent",
            "value": host["lines/s"] / bare["lines/s"],
            "unit": "ratio",
            "target": ">= 0.97",
            "detail": f"raw tail with add_host: true; headers: [host] (the default)"
            f" {host['lines/s']:,.0f} lines/s, CPU {host['cpu_s_per_M']:.2f} s per M lines;"
            f" headers: [] {bare['lines/s']:,.0f} lines/s,"
            f" CPU {bare['cpu_s_per_M']:.2f} s per M lines",
        },
        *(
            {
                "area": "agent",
                "metric": f"the audit's cost: lines/s with it on / off ({what})",
                "value": on["lines/s"] / off["lines/s"],
                "unit": "ratio",
                "target": ">= 0.97",
                "reference": "issue 35",
                "detail": f"audit on {on['lines/s']:,.0f} lines/s,"
                f" CPU {on['cpu_s_per_M']:.2f} s per M lines; off {off['lines/s']:,.0f}"
                f" lines/s, CPU {off['cpu_s_per_M']:.2f} s per M lines",
            }
            for what, on, off in (("raw tail", raw, raw_off), ("nginx → JSON", js, js_off))
        ),
    ]
    if udp is not None:
        out.append(
            {
                "area": "agent",
                "metric": f"UDP 50,000 datagrams/s for {udp_seconds:g} s: lost"
                + ("" if udp_seconds >= 30 else " (issue: 30 s; --full)"),
                "value": udp["lost"],
                "unit": "datagrams",
                "target": "== 0",
                "reference": "issue 5",
                "detail": f"{udp['sent']:,} sent, {udp['delivered']:,} delivered,"
                f" {udp['dropped_by_channel']:,} dropped by the channel",
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--udp-rate", type=int, default=50_000)
    parser.add_argument("--udp-seconds", type=float, default=10)
    parser.add_argument("--idempotence", default="true", choices=("true", "false"))
    parser.add_argument("--cases", default="raw,syslog-ng,json,udp")
    parser.add_argument(
        "--threads", action="store_true", help="CPU per M lines of each thread, each run"
    )
    args = parser.parse_args()
    run_cases(
        args.lines,
        args.runs,
        args.udp_rate,
        args.udp_seconds,
        args.idempotence,
        args.cases.split(","),
        args.threads,
    )


if __name__ == "__main__":
    main()
