"""`strip_query` interceptor: the query string and fragment (from the first `?` or
`#` on) cut off the request path of parsed records, and off the other fields listed.

In each field of `fields` (by default the nginx parser's `path`) of a parsed record,
everything from the first `?` or `#` on is removed: `/login?token=s3cret#top`
becomes `/login`, which keeps tokens, e-mail addresses and search terms that clients
put in URLs out of the logs, and groups the requests of one page. Add `referrer` to
strip the pages clients came from too. Values that are no text, and events without
a record (an unparsed line travels as its raw body, query string included), are left
as they are. Events with a field shortened are counted in
`logflume_agent_query_stripped_total`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import field

from agent.api import Context, Event, Interceptor, register

_CUT = re.compile(r"[?#]")


def strip(path: str) -> str:
    """`path` up to its first `?` or `#`."""
    m = _CUT.search(path)
    return path if m is None else path[: m.start()]


@dataclasses.dataclass
class StripQueryConfig:
    fields: list[str] = field(default_factory=lambda: ["path"])  # fields cut, e.g. [path, referrer]


@register("interceptor", "strip_query")
class StripQuery(Interceptor):
    """Shortens fields of parsed records; owned by one source's pipeline (single task)."""

    Config = StripQueryConfig

    @classmethod
    def validate(cls, config: StripQueryConfig) -> list[str]:
        return [] if config.fields else ["fields: empty: name a field"]

    def __init__(self, config: StripQueryConfig, context: Context):
        super().__init__(config, context)
        self._fields = tuple(dict.fromkeys(config.fields))
        self._stripped = context.metrics.counter(
            "logflume_agent_query_stripped_total",
            "Events whose path (or another field of strip_query) lost a query string or fragment",
            component=context.name,
        )

    def intercept(self, events: list[Event]) -> list[Event]:
        changed = 0
        for e in events:
            rec = e.record
            if rec is None:
                continue
            hit = False
            for name in self._fields:
                value = rec.get(name)
                # two substring tests cost less than a regex search on the common path
                if isinstance(value, str) and ("?" in value or "#" in value):
                    rec[name] = strip(value)
                    hit = True
            changed += hit
        if changed:
            self._stripped.inc(changed)
        return events
