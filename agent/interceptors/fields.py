"""`fields` interceptor: drop, rename and mask top-level fields of parsed records
(`drop: [user_agent]`, `rename: {client: client_ip}`, `mask: {user: "***"}`); events
without a record are left as they are.

Every key names a field as the record has it when it reaches this interceptor, and
the three act together: `mask` replaces a field's value (a null one stays null: there
is nothing to hide), `drop` removes fields, `rename` moves values to new names all at
once (so `{a: b, b: a}` swaps them), replacing a field the record already had under
the new name. A field listed in `drop` cannot also be renamed or masked.

Only records change: an event without one (no parser ran, or the line did not
parse and travels as its raw body, header `parse_error`) is left as it is; so are
headers. Events whose record had a field dropped, renamed or masked are counted in
`logflume_agent_fields_changed_total`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from agent.api import Context, Event, Interceptor, register


@dataclasses.dataclass
class FieldsConfig:
    drop: list[str] = field(default_factory=list)  # fields removed from the record
    rename: dict[str, str] = field(default_factory=dict)  # {old: new}, all at once; replaces `new`
    mask: dict[str, Any] = field(default_factory=dict)  # {field: value}: replaces a non-null value


@register("interceptor", "fields")
class Fields(Interceptor):
    """Changes parsed records in place; owned by one source's pipeline (single task)."""

    Config = FieldsConfig

    @classmethod
    def validate(cls, config: FieldsConfig) -> list[str]:
        if not (config.drop or config.rename or config.mask):
            return ["nothing to change: set drop, rename or mask"]
        errors = []
        for name in dict.fromkeys(config.drop):
            if name in config.mask:
                errors.append(f"drop: {name!r} is also masked: drop it or mask it")
            if name in config.rename:
                errors.append(f"drop: {name!r} is also renamed: drop it or rename it")
        targets: dict[str, str] = {}
        for old, new in config.rename.items():
            if not new:
                errors.append(f"rename.{old}: the new name is empty")
            elif new == old:
                errors.append(f"rename.{old}: renamed to itself")
            elif new in targets:
                errors.append(f"rename.{old}: {new!r} is also the new name of {targets[new]!r}")
            targets.setdefault(new, old)
        return errors

    def __init__(self, config: FieldsConfig, context: Context):
        super().__init__(config, context)
        self._mask = tuple(config.mask.items())
        self._drop = tuple(dict.fromkeys(config.drop))
        self._rename = tuple(config.rename.items())
        self._names = frozenset((*config.mask, *config.drop, *config.rename))
        self._changed = context.metrics.counter(
            "logflume_agent_fields_changed_total",
            "Events whose record had a field dropped, renamed or masked (fields interceptor)",
            component=context.name,
        )

    def intercept(self, events: list[Event]) -> list[Event]:
        names, masks, drops, renames = self._names, self._mask, self._drop, self._rename
        changed = 0
        for e in events:
            rec = e.record
            if rec is None or names.isdisjoint(rec):
                continue
            hit = False
            for name, value in masks:
                if rec.get(name) is not None:
                    rec[name] = value
                    hit = True
            for name in drops:
                if name in rec:
                    del rec[name]
                    hit = True
            if renames:
                moved = [(new, rec.pop(old)) for old, new in renames if old in rec]
                for new, value in moved:
                    rec[new] = value
                hit = hit or bool(moved)
            changed += hit
        if changed:
            self._changed.inc(changed)
        return events
