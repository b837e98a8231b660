"""`json` interceptor: a body that is a JSON object becomes the event's record.

Anything else (invalid JSON, an array, a scalar) is kept with `record=None` and the
header `parse_error`, and counted.
"""

from __future__ import annotations

import dataclasses

import orjson

from agent.api import Context, Event, Interceptor, register
from agent.interceptors._common import flag, parse_error_counter


@dataclasses.dataclass
class JsonConfig:
    pass


@register("interceptor", "json")
class JsonParser(Interceptor):
    """Parses JSON bodies; owned by one source's pipeline (single task)."""

    Config = JsonConfig

    def __init__(self, config: JsonConfig, context: Context):
        super().__init__(config, context)
        self._errors = parse_error_counter(context, "json")

    def intercept(self, events: list[Event]) -> list[Event]:
        loads, errors = orjson.loads, 0
        for e in events:
            try:
                value = loads(e.body)
            except orjson.JSONDecodeError:
                flag(e, "json: invalid JSON")
                errors += 1
                continue
            if isinstance(value, dict):
                e.record = value
            else:
                flag(e, f"json: expected an object, got {type(value).__name__}")
                errors += 1
        if errors:
            self._errors.inc(errors)
        return events
