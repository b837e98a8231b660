"""The member processes of bench/bench_rebalance.py: confluent-kafka group consumers,
one per thread, whose rebalance callbacks are reported as JSON lines.

    python -m bench.rebalance_members --bootstrap HOST:PORT --group G --topic T \\
        --mode eager|cooperative|consumer --names m0,m1,...

The consumers are created at start (`ready` is printed once they all exist); stdin
commands, one a line:

- `go`: every consumer subscribes to the topic, each in its own thread;
- `add NAME`: a new consumer NAME is created and subscribes (the joining member);
- `close NAME`: consumer NAME close()s (LeaveGroup);
- `quit` (or end of input): every consumer close()s, then the process exits.

Events, one JSON object a line on stdout: `assign`, `revoke` and `lost` with the
member (`m`), the partitions named by the callback (`parts`: incremental for the
cooperative and consumer protocols, the whole assignment for eager) and the time
(`t`: time.monotonic(), CLOCK_MONOTONIC, which every process of the machine shares);
`subscribe` (just before subscribe() is called) and `closed` (once close() returned).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

# the client settings of each group protocol compared; the heartbeat interval of the
# classic ones comes from --heartbeat-ms, that of the consumer protocol from the broker
MODES = {
    "eager": {"partition.assignment.strategy": "range"},
    "cooperative": {"partition.assignment.strategy": "cooperative-sticky"},
    "consumer": {"group.protocol": "consumer", "group.remote.assignor": "uniform"},
}
CLASSIC_SESSION_MS = 30_000

_print_lock = threading.Lock()


def say(obj: dict) -> None:
    with _print_lock:
        print(json.dumps(obj), flush=True)


def client_config(
    bootstrap: str, group: str, name: str, mode: str, heartbeat_ms: int
) -> dict[str, object]:
    """The confluent-kafka settings of one member of `group` in `mode`."""
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "latest",
        **MODES[mode],
    }
    if mode != "consumer":  # the consumer protocol takes both from the broker
        conf["heartbeat.interval.ms"] = heartbeat_ms
        conf["session.timeout.ms"] = CLASSIC_SESSION_MS
    return conf


class Member:
    """One consumer and the thread that owns it: it subscribes, polls, and close()s
    when told to."""

    def __init__(self, name: str, conf: dict[str, object], topic: str):
        from confluent_kafka import Consumer

        self.name = name
        self.topic = topic
        self.consumer = Consumer(conf)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _callback(self, kind: str):
        def report(consumer, partitions) -> None:
            say(
                {
                    "event": kind,
                    "m": self.name,
                    "t": time.monotonic(),
                    "parts": sorted(p.partition for p in partitions),
                }
            )

        return report

    def _run(self) -> None:
        say({"event": "subscribe", "m": self.name, "t": time.monotonic()})
        self.consumer.subscribe(
            [self.topic],
            on_assign=self._callback("assign"),
            on_revoke=self._callback("revoke"),
            on_lost=self._callback("lost"),
        )
        while not self.stop.is_set():
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error():
                say({"event": "error", "m": self.name, "error": str(msg.error())})
        self.consumer.close()
        say({"event": "closed", "m": self.name, "t": time.monotonic()})

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--mode", choices=sorted(MODES), required=True)
    ap.add_argument("--names", required=True, help="comma list of the members' names")
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    args = ap.parse_args(argv)

    def member(name: str) -> Member:
        conf = client_config(args.bootstrap, args.group, name, args.mode, args.heartbeat_ms)
        return Member(name, conf, args.topic)

    members = {name: member(name) for name in args.names.split(",") if name}
    say({"event": "ready", "members": len(members)})
    for line in sys.stdin:
        verb, _, name = line.strip().partition(" ")
        if verb == "go":
            for m in members.values():
                m.start()
        elif verb == "add":
            members[name] = member(name)
            members[name].start()
        elif verb == "close":
            members[name].close()
        elif verb == "quit":
            break
        else:
            say({"event": "error", "error": f"unknown command {line.strip()!r}"})
    for m in members.values():
        m.stop.set()
    for m in members.values():
        m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
