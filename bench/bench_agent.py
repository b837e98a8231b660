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
starts, and read by every tail case from its beginning: `logflume agent run`
(`start_at: beginning`) and syslog-ng (bench/peers/syslog_ng.py, file source to
its kafka-c destination, same producer settings). Each run does the cases one
after the other (interleaved, so a load change hits all of them); figures are
medians over runs. `host` is `raw` with the source's `add_host: true` and the sink's
default `headers: [host]` (a `host` record header on every record), `host-noheaders`
the same with `headers: []`: the cost of record headers, side by side; `noaudit`
and `json-noaudit` are `raw` and `json` with the sink's `audit: false`: the cost of
the audit's counts and checksums, side by side; `json-anon` is `json` with
`anonymize_ip` (truncate) and `strip_query` after the parser: the cost of a web
host's privacy transforms, side by side with `json`.

Clock: the topic's high watermark, polled every 20 ms, i.e. records the broker
has acknowledged (acks=all). "lines/s" is the steady rate from the first poll
that sees records to the one that sees all of them (startup excluded: Python
imports take ~1 s); "wall" counts from process start. CPU seconds per million
lines are the process's own (all threads, from /proc) over the same steady
window; peak RSS is VmHWM. UDP: a sender process paces datagrams at
`--udp-rate`; loss = sent - delivered to the broker.
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


def measure(pid: int, count, n: int, started: float, limit: float = 600) -> dict:
    """Poll `count()` (records delivered) until `n`; rates and CPU of process `pid`."""
    first = None
    while True:
        c = count()
        now = time.monotonic()
        if first is None and c > 0:
            first = (now, c, proc_stats(pid)[0])
        if c >= n:
            break
        if now - started > limit:
            raise TimeoutError(f"{c} of {n} lines delivered in {limit}s")
        time.sleep(0.02)
    cpu, rss = proc_stats(pid)
    t_first, c_first, cpu_first = first
    steady = max(n - c_first, 1)
    return {
        "lines/s": steady / max(now - t_first, 1e-3),
        "wall lines/s": n / (now - started),
        "cpu_s_per_M": (cpu - cpu_first) / steady * 1e6,
        "cpu_s": cpu,
        "rss_mib": rss / 2**20,
    }


def tail_case(tmp: Path, log: Path, n: int, broker: BrokerProcess, kind: str, idem: str, run):
    """One run of tail case `kind`: raw, json, json-anon, eos, host or host-noheaders;
    a `-noaudit` suffix (or `noaudit` alone: raw) turns the sink's audit off."""
    parsed = kind.startswith("json")
    interceptors = "{type: nginx}"
    if kind == "json-anon":
        interceptors += ", {type: anonymize_ip}, {type: strip_query}"
    case = tmp / f"tail-{kind}-{run}"
    case.mkdir(parents=True)
    topic = f"bench-{case.name}"
    text = TAIL.format(
        log=log,
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
    count = high_watermark(broker.bootstrap, topic)
    started = time.monotonic()
    agent.start()
    try:
        return measure(agent.proc.pid, count, n, started)
    finally:
        agent.stop()
        count.close()


def peer_case(
    log: Path, n: int, broker: BrokerProcess, topic: str, idem: bool, workers: int = 1
) -> dict:
    count = high_watermark(broker.bootstrap, topic)
    try:
        peer = SyslogNg(
            log, broker.bootstrap, topic, linger_ms=20, idempotence=idem, workers=workers
        )
        with peer:
            started = time.monotonic()
            try:
                return measure(peer.proc.pid, count, n, started)
            except TimeoutError:
                print(peer.output()[-2000:])
                raise
    finally:
        count.close()


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


def report(name: str, results: list[dict], line_bytes: float) -> dict:
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(
        f"{name:>10}: {med['lines/s']:>9,.0f} lines/s {med['lines/s'] * line_bytes / 2**20:6.1f} MiB/s"
        f" | wall {med['wall lines/s']:>9,.0f} lines/s | CPU {med['cpu_s_per_M']:5.2f} s per M lines"
        f" | peak RSS {med['rss_mib']:5.0f} MiB | runs: "
        + ", ".join(f"{r['lines/s']:,.0f}" for r in results)
    )
    return med


def run_cases(
    n: int, runs: int, udp_rate: int, udp_seconds: float, idem: str, cases: list[str]
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
                        r = peer_case(log, n, broker, f"bench-syslog-ng-{run}", idem == "true")
                    else:
                        r = tail_case(tmp, log, n, broker, case, idem, run)
                    results[case].append(r)
            med = {case: report(case, rs, line_bytes) for case, rs in results.items()}
            if "raw" in med and "syslog-ng" in med:
                ours, peer = med["raw"], med["syslog-ng"]
                print(
                    f"logflume/syslog-ng: {ours['lines/s'] / peer['lines/s']:.2f}x lines/s, "
                    f"{ours['cpu_s_per_M'] / peer['cpu_s_per_M']:.2f}x CPU s per M lines"
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
        "quick": (200_000, 1, 3.0),
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
            "detail": f"{setup}; CPU {raw['cpu_s_per_M']:.2f} s per M lines,"
            f" peak RSS {raw['rss_mib']:.0f} MiB",
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
    args = parser.parse_args()
    run_cases(
        args.lines,
        args.runs,
        args.udp_rate,
        args.udp_seconds,
        args.idempotence,
        args.cases.split(","),
    )


if __name__ == "__main__":
    main()
