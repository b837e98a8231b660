"""IncrementalAlterConfigs' operations, shared by every config resource the broker
serves (topics, brokers, client-metrics subscriptions, groups): the operation codes and
the list arithmetic of APPEND and SUBTRACT, as Kafka's prepareIncrementalConfigs does it.
Pure functions; each resource keeps its own checks, defaults and error types."""

from __future__ import annotations

import re

SET, DELETE, APPEND, SUBTRACT = range(4)  # AlterableConfig.config_operation

_COMMA = re.compile(r"\s*,\s*")


def split_list(value: str) -> list[str]:
    """A LIST value as Kafka's ConfigDef parses it: empty -> [], else split at commas
    (whitespace around them dropped)."""
    value = value.strip()
    return [] if not value else _COMMA.split(value)


def apply_list_op(op: int, current: str, value: str) -> str:
    """`current` (a list value) after APPEND (the items of `value` not already there,
    in order, each once) or SUBTRACT (every item of `value` removed)."""
    items = split_list(current)
    given = split_list(value)
    if op == APPEND:
        for v in given:
            if v not in items:
                items.append(v)
    else:
        items = [v for v in items if v not in given]
    return ",".join(items)


def list_op_refused(op: int, name: str) -> str:
    """Kafka's message for APPEND/SUBTRACT on a config that is not a list."""
    verb = "append" if op == APPEND else "subtract"
    return f"Config value {verb} is not allowed for config key: {name}"
