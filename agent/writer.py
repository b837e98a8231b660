"""pipelines.yaml written back from compiled specs: the inverse of agent/config.py.

For tools that derive a pipelines file from another one (`logflume up` points the
demo's file at its own broker, ports and data directory) by changing the compiled,
typed specs rather than the YAML. `document` gives the mapping a YAML dump writes:
each component as its `type`, its wiring keys and the keys of its Config that differ
from their defaults, so that compiling the text again gives equal specs.

Values are written as a user writes them (`yaml_value`): a Size or a Duration with
its unit when one fits exactly ("64MiB", "250ms"), a nested block as the mapping of
its keys that differ from their defaults. The reference (agent/reference/) writes
defaults the same way. `${VAR}` references were expanded by the compiler: the text
holds their values (a secret too), so write it where only the agent's user reads.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from agent.annotations import config_fields
from agent.api import Duration, Size
from agent.config import AgentSpec, ComponentSpec
from agent.schema import DURATION_UNITS

SIZE_UNITS = (
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("TB", 10**12),
    ("GB", 10**9),
    ("MB", 10**6),
    ("kB", 10**3),
)
_DURATION_UNITS = sorted(DURATION_UNITS.items(), key=lambda unit: -unit[1])  # largest first


def yaml_value(value: Any) -> Any:
    """`value` as a user writes it, made of YAML's (and JSON's) own types."""
    if isinstance(value, Size):
        for unit, factor in SIZE_UNITS:
            if value and value % factor == 0:
                return f"{value // factor}{unit}"
        return int(value)
    if isinstance(value, Duration):
        for unit, seconds in _DURATION_UNITS:
            count = value / seconds
            if count >= 1 and math.isclose(count, round(count)):
                return f"{round(count)}{unit}"
        return float(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return changed_keys(value)
    if isinstance(value, list | tuple):
        return [yaml_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): yaml_value(v) for k, v in value.items()}
    return value


def changed_keys(config: Any) -> dict[str, Any]:
    """The keys of a Config dataclass instance that are required or differ from their
    defaults, in declaration order."""
    out = {}
    for f in config_fields(type(config)):
        value = getattr(config, f.name)
        if f.required or value != f.default_value():
            out[f.name] = yaml_value(value)
    return out


def document(agents: dict[str, AgentSpec]) -> dict[str, Any]:
    """The pipelines file of `agents`, as a mapping for yaml.safe_dump."""
    return {"agents": {name: _agent(spec) for name, spec in agents.items()}}


def _agent(spec: AgentSpec) -> dict[str, Any]:
    out = changed_keys(spec.settings)
    out["sources"] = {}
    for name, source in spec.sources.items():
        entry: dict[str, Any] = {"type": source.cls.type_name, "channels": list(source.channels)}
        if source.interceptors:
            entry["interceptors"] = [_component(i) for i in source.interceptors]
        if selector := changed_keys(source.selector):
            entry["selector"] = selector
        out["sources"][name] = {**entry, **changed_keys(source.config)}
    out["channels"] = {name: _component(c) for name, c in spec.channels.items()}
    out["sinks"] = {
        name: {"type": s.cls.type_name, "channel": s.channel, **changed_keys(s.config)}
        for name, s in spec.sinks.items()
    }
    return out


def _component(spec: ComponentSpec) -> dict[str, Any]:
    return {"type": spec.cls.type_name, **changed_keys(spec.config)}
