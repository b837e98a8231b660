"""`add_fields` interceptor: static fields, the host name and a timestamp.

`target` chooses where they go: `headers` (values turned into strings), `record`
(values as given; only events that already have a record, so an unparsed line does
not grow a record that would hide its body), or `both`. The timestamp is the time
of the batch, ISO 8601 in UTC with milliseconds.

Headers are shared between events (agent/api.py), so they are never updated in
place: each distinct headers dict of a batch (usually one) is merged once into a
new dict, and the events that shared the old one share the new one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, Literal

from agent.api import Context, Event, Interceptor, register
from common.hostname import this_host


@dataclasses.dataclass
class AddFieldsConfig:
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)  # fields to add: {name: value}
    host: bool = False  # also add this machine's name, as `${HOST}`
    host_key: str = "host"  # name of the host name field
    timestamp: bool = False  # also add the time of the batch (ISO 8601, UTC, milliseconds)
    timestamp_key: str = "timestamp"  # name of the time field
    target: Literal["headers", "record", "both"] = "headers"  # where they go; record: parsed only


@register("interceptor", "add_fields")
class AddFields(Interceptor):
    """Adds fields to every event; owned by one source's pipeline (single task)."""

    Config = AddFieldsConfig

    @classmethod
    def validate(cls, config: AddFieldsConfig) -> list[str]:
        if not (config.fields or config.host or config.timestamp):
            return ["fields: nothing to add (set fields, host: true or timestamp: true)"]
        return []

    def __init__(self, config: AddFieldsConfig, context: Context):
        super().__init__(config, context)
        static = dict(config.fields)
        if config.host:
            static[config.host_key] = this_host()
        self._static = static
        self._static_headers = {k: v if isinstance(v, str) else str(v) for k, v in static.items()}
        self._to_headers = config.target in ("headers", "both")
        self._to_record = config.target in ("record", "both")

    def intercept(self, events: list[Event]) -> list[Event]:
        fields, headers = self._static, self._static_headers
        if self.config.timestamp:
            now = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
            now = now.replace("+00:00", "Z")
            fields = {**fields, self.config.timestamp_key: now}
            headers = {**headers, self.config.timestamp_key: now}
        if self._to_headers:
            merged: dict[int, dict[str, str]] = {}
            for e in events:
                new = merged.get(id(e.headers))
                if new is None:
                    new = merged[id(e.headers)] = {**e.headers, **headers}
                e.headers = new
        if self._to_record:
            for e in events:
                if e.record is not None:
                    e.record.update(fields)
        return events
