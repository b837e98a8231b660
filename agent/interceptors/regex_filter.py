"""`regex_filter` interceptor: keep (`include`) or drop (`exclude`) matching events.

The pattern is searched (re.search) in the body, or in one header when `header` is
set (an event without that header never matches). Dropped events are settled, so
their acknowledgement still completes (a tail's position moves past them), and
counted in `logflume_agent_filtered_out_total`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Literal

from agent.api import Context, Event, Interceptor, register


@dataclasses.dataclass
class RegexFilterConfig:
    pattern: str  # regex searched for in the body (or in `header`)
    mode: Literal["include", "exclude"] = "include"  # keep the matching events, or drop them
    header: str | None = None  # search this header instead; an event without it never matches


@register("interceptor", "regex_filter")
class RegexFilter(Interceptor):
    """Filters events; owned by one source's pipeline (single task)."""

    Config = RegexFilterConfig

    @classmethod
    def validate(cls, config: RegexFilterConfig) -> list[str]:
        try:
            re.compile(config.pattern)
        except re.error as exc:
            return [f"pattern: invalid regex ({exc})"]
        return []

    def __init__(self, config: RegexFilterConfig, context: Context):
        super().__init__(config, context)
        self._bytes = re.compile(config.pattern.encode()).search
        self._text = re.compile(config.pattern).search
        self._keep = config.mode == "include"
        self._dropped = context.metrics.counter(
            "logflume_agent_filtered_out_total",
            "Events dropped by regex_filter",
            component=context.name,
        )

    def intercept(self, events: list[Event]) -> list[Event]:
        keep, header = self._keep, self.config.header
        kept = []
        for e in events:
            if header is None:
                hit = self._bytes(e.body) is not None
            else:
                value = e.headers.get(header)
                hit = value is not None and self._text(value) is not None
            if hit == keep:
                kept.append(e)
            else:
                e.settle()
        if len(kept) != len(events):
            self._dropped.inc(len(events) - len(kept))
        return kept
