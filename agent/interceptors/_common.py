"""Shared by the parsing interceptors: the parse-error rule and its counter.

A line that fails to parse is never dropped: it keeps `record=None`, gets the
header `parse_error` (a short reason; set copy-on-write, as headers are shared
between events) and is counted in
`logflume_agent_parse_errors_total{component, parser}`.
"""

from __future__ import annotations

from agent.api import Context, Counter, Event


def parse_error_counter(context: Context, parser: str) -> Counter:
    return context.metrics.counter(
        "logflume_agent_parse_errors_total",
        "Lines a parser could not parse (kept, flagged with header parse_error)",
        component=context.name,
        parser=parser,
    )


def flag(event: Event, reason: str) -> None:
    event.record = None
    event.time = None
    event.set_header("parse_error", reason)
