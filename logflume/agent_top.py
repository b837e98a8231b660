"""`logflume agent top`: a running agent's components, live, from its /metrics
(Vector's `vector top`).

Each frame is two scrapes `interval` apart: per component its kind and type (the
`logflume_agent_component_info` series the runtime keeps), events in and out per
second over the interval, its errors since the agent started, and a channel's fill
(the larger of events/capacity and bytes/capacity). What in, out and errors count:

    source   in: events read; out: events put into channels; errors: events dropped
             (a full channel refused them, or no channel was routed to)
    channel  in: events put; out: events taken and committed; errors: offers refused
             and takes rolled back
    sink     in: events taken and settled (delivered or failed); out: delivered;
             errors: events failed for good, take batches rolled back, and
             authentication failures

The frame is plain text, redrawn in place with ANSI escape codes when stdout is a
terminal; `--once` prints one frame and exits.
"""

from __future__ import annotations

import dataclasses
import io
import sys
import time
import urllib.error
import urllib.request

from logflume.table import Table

INFO = "logflume_agent_component_info"
A = "logflume_agent_"
# kind -> (in counters, out counters, error counters), each summed
FLOWS = {
    "source": (
        (A + "source_events_in_total",),
        (A + "source_events_out_total",),
        (A + "source_events_dropped_total",),
    ),
    "channel": (
        (A + "channel_put_total",),
        (A + "channel_take_committed_total",),
        (A + "channel_offer_refused_total", A + "channel_take_rollback_total"),
    ),
    "sink": (
        (A + "sink_events_out_total", A + "sink_events_failed_total"),
        (A + "sink_events_out_total",),
        (
            A + "sink_events_failed_total",
            A + "sink_rollbacks_total",
            A + "kafka_auth_failures_total",
        ),
    ),
}
# a counter that tells a component's kind when the agent names none (no info series)
KIND_OF = {flows[0][0]: kind for kind, flows in FLOWS.items()}
CLEAR = "\x1b[H\x1b[2J"


class Unreachable(Exception):
    """The agent's /metrics could not be read; the message says why, in one line."""


# (metric name, component) -> value
Sample = dict[tuple[str, str], float]


@dataclasses.dataclass
class Scrape:
    values: Sample
    components: list[tuple[str, str, str]]  # (kind, name, type)
    at: float


def scrape(url: str, timeout: float = 5.0) -> Scrape:
    """Read and parse the agent's /metrics once."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            text = resp.read().decode()
    except urllib.error.HTTPError as exc:
        raise Unreachable(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(f"cannot reach the agent at {url}: {reason}") from None
    at = time.monotonic()
    values: Sample = {}
    components: list[tuple[str, str, str]] = []
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise Unreachable(f"{url} is not a metrics page: {exc}") from None
    for family in families:
        for s in family.samples:
            component = s.labels.get("component")
            if component is None:
                continue
            if s.name == INFO:
                if s.value == 1:
                    components.append((s.labels["kind"], component, s.labels["type"]))
                continue
            key = (s.name, component)
            values[key] = values.get(key, 0.0) + s.value
    if not components:  # an agent of before the info series: kinds from the counters
        seen = {(KIND_OF[n], c) for n, c in values if n in KIND_OF}
        components = [(kind, name, "?") for kind, name in seen]
    order = list(FLOWS)
    components.sort(key=lambda c: (order.index(c[0]) if c[0] in order else len(order), c[1]))
    return Scrape(values, components, at)


def frame(before: Scrape, after: Scrape) -> Table:
    """The table of one frame: rates between the two scrapes."""
    table = Table(["KIND", "COMPONENT", "TYPE", "IN/S", "OUT/S", "ERRORS", "FILL"])
    span = max(after.at - before.at, 1e-3)
    for kind, name, type_name in after.components:
        ins, outs, errors = FLOWS.get(kind, ((), (), ()))

        def total(names, sample: Scrape, name=name) -> float:
            return sum(sample.values.get((n, name), 0.0) for n in names)

        def rate(names) -> str:
            if not names:
                return "-"
            return f"{max(0.0, total(names, after) - total(names, before)) / span:.1f}"

        table.add(
            kind,
            name,
            type_name,
            rate(ins),
            rate(outs),
            f"{total(errors, after):.0f}" if errors else "-",
            _fill(after, name) if kind == "channel" else "-",
        )
    return table


def _fill(sample: Scrape, name: str) -> str:
    fills = []
    for used, capacity in (("events", "capacity_events"), ("bytes", "capacity_bytes")):
        cap = sample.values.get((A + "channel_" + capacity, name), 0.0)
        if cap > 0:
            fills.append(sample.values.get((A + "channel_" + used, name), 0.0) / cap)
    return f"{100 * max(fills):.1f}%" if fills else "-"


def run(url: str, interval: float, once: bool, output_format: str = "text") -> int:
    """Print frames until interrupted (one with `once`; `output_format` json: the
    rows as a JSON array); 1 when the agent cannot be read."""
    redraw = sys.stdout.isatty() and not once
    try:
        before = scrape(url)
        while True:
            time.sleep(interval)
            after = scrape(url)
            table = frame(before, after)
            if output_format == "json":
                table.print("json")
            else:
                text = io.StringIO()
                table.print("text", text)
                header = f"agent at {url}, every {interval:g}s ({time.strftime('%H:%M:%S')})"
                sys.stdout.write((CLEAR if redraw else "") + header + "\n" + text.getvalue())
            sys.stdout.flush()
            if once:
                return 0
            before = after
    except Unreachable as exc:
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
