"""Duplicates under crashes: an agent SIGKILLed under load, counted per line.

A writer appends numbered lines to a file at `rate` lines/s; an agent tails it into
a broker through a memory or file channel (defaults otherwise) and is SIGKILLed
`kills` times at random moments (seeded), each time restarted at once. Once the
writer stopped and every line arrived, the topic is read and each line counted:
lost (0 copies), twice, three times or more. `run` is shared with the test
(tests/agent/test_agent_crash_duplicates.py).

    python -m bench.bench_duplicates [--seconds 30] [--kills 5] [--seed 1]
        [--delivery at_least_once,exactly_once] [--channels memory,file]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import random
import tempfile
import threading
import time
from pathlib import Path

from testkit.agent import AgentProcess, read_topic

MIN_UP_S = 1.0  # least time an agent runs between a restart and the next kill
CHANNELS = {"memory": "{type: memory}", "file": "{type: file}"}

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      logs: {{type: tail, paths: ["{logs}/*.log"], start_at: beginning, channels: [c]}}
    channels:
      c: {channel}
    sinks:
      k: {{type: broker, channel: c, topic: lines, bootstrap_servers: "{bootstrap}",
          delivery: {delivery}}}
"""


@dataclasses.dataclass
class Copies:
    lines: int
    lost: int
    twice: int
    thrice: int  # three copies or more

    def __str__(self) -> str:
        return f"{self.lines} lines: lost {self.lost}, twice {self.twice}, 3+ times {self.thrice}"


def line(i: int) -> bytes:
    return b"%08d GET /index.html HTTP/1.1 200 612 - curl/8.5.0" % i


def write(path: Path, n: int, rate: int) -> None:
    """`n` lines at `rate` lines/s, in bursts every 10 ms (nginx-like pace)."""
    per, start = max(1, rate // 100), time.monotonic()
    with open(path, "ab", buffering=0) as f:
        for i in range(0, n, per):
            f.write(b"".join(line(j) + b"\n" for j in range(i, min(n, i + per))))
            ahead = start + (i + per) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)


def count(bootstrap: str, n: int, deadline_s: float = 120.0) -> Copies:
    """Per line, the copies in topic `lines` (read until every line arrived)."""
    seen: collections.Counter = collections.Counter()
    done = [0]

    def until(msgs: list) -> bool:
        for m in msgs[done[0] :]:
            seen[m.value()] += 1
        done[0] = len(msgs)
        return sum(1 for i in range(n) if line(i) in seen) == n if len(seen) >= n else False

    read_topic(bootstrap, "lines", until, deadline_s)
    copies = [seen.get(line(i), 0) for i in range(n)]
    return Copies(
        n,
        sum(c == 0 for c in copies),
        sum(c == 2 for c in copies),
        sum(c >= 3 for c in copies),
    )


def run(
    tmp: Path,
    bootstrap: str,
    channel: str,
    seconds: float,
    kills: int,
    seed: int,
    rate: int = 5000,
    delivery: str = "at_least_once",
) -> Copies:
    """One round: write for `seconds`, SIGKILL + restart `kills` times at random
    moments in between (seeded), then count the copies of every line (read
    committed, librdkafka's default)."""
    logs = tmp / "logs"
    logs.mkdir(parents=True)
    text = PIPELINE.format(
        logs=logs, channel=CHANNELS[channel], bootstrap=bootstrap, delivery=delivery
    )
    agent = AgentProcess(tmp, text).start()
    n = int(seconds * rate)
    writer = threading.Thread(target=write, args=(logs / "access.log", n, rate))
    rng = random.Random(seed)
    # kill moments spread over the writing time, at least 1 s apart (time to get going)
    moments = sorted(rng.uniform(1.0, seconds - 1.0) for _ in range(kills))
    began = time.monotonic()
    writer.start()
    try:
        up = time.monotonic()
        for at in moments:
            # a kill within a second of the restart is put off to that second: the
            # agent is running when it is killed (two kills within one position save
            # of a restart may deliver a line a third time, which no kill rate here
            # is meant to measure)
            time.sleep(max(0.0, began + at - time.monotonic(), up + MIN_UP_S - time.monotonic()))
            agent.kill()
            agent.start()
            up = time.monotonic()
        writer.join()
        return count(bootstrap, n)
    finally:
        writer.join()
        agent.stop()


def main() -> None:
    from testkit.procs import BrokerProcess

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rate", type=int, default=5000)
    p.add_argument("--channels", default="memory,file")
    p.add_argument("--delivery", default="at_least_once,exactly_once")
    args = p.parse_args()
    for delivery, channel in (
        (d, c) for d in args.delivery.split(",") for c in args.channels.split(",")
    ):
        with tempfile.TemporaryDirectory() as d:
            broker = BrokerProcess(Path(d) / "broker").start()
            try:
                copies = run(
                    Path(d) / "agent", broker.bootstrap, channel, args.seconds, args.kills,
                    args.seed, args.rate, delivery,
                )  # fmt: skip
            finally:
                broker.stop()
        print(f"{delivery}, {channel}: {copies}", flush=True)


if __name__ == "__main__":
    main()
