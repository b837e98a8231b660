"""Typed conversion of YAML nodes into component `Config` dataclasses.

The compiler works on PyYAML's composer nodes (`yaml.compose`), not on loaded
Python values, so that every error can name its file, line and column. `build`
turns a mapping node into a dataclass instance according to the field annotations
(as agent/annotations.py reads them):

    str, int, float, bool           scalars of that YAML type (an int is a fine float)
    Size, Duration (agent/api.py)   64MiB / 512k / 1.5GB;  5s / 250ms / 2m / 1h
    list[X], dict[str, X]           sequences and mappings of converted items
    Literal[...]                    one of the listed values
    X | None                        null allowed
    a nested dataclass              a mapping, recursively
    Any                             whatever the YAML holds

Errors are appended to an `Errors` collector and conversion goes on, so that one
pass reports every problem.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable
from typing import Any

import yaml

from agent.annotations import (
    Anything,
    Choice,
    ListOf,
    MappingOf,
    Nested,
    Null,
    OneOf,
    Scalar,
    Shape,
    config_fields,
    shape_of,
)
from agent.api import Duration, Size

_INVALID = object()


@dataclasses.dataclass(frozen=True)
class ConfigError:
    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}:{self.line}:{self.column}: {where}{self.message}"


class Errors:
    """Collects `ConfigError`s for one file; used by one compile call."""

    def __init__(self, file: str):
        self.file = file
        self.items: list[ConfigError] = []

    def add(self, node: yaml.Node | None, path: str, message: str) -> None:
        line = node.start_mark.line + 1 if node is not None else 1
        col = node.start_mark.column + 1 if node is not None else 1
        self.items.append(ConfigError(self.file, line, col, path, message))

    def __len__(self) -> int:
        return len(self.items)


_constructor = yaml.constructor.SafeConstructor()


def plain(node: yaml.Node) -> Any:
    """The Python value of a node (as yaml.safe_load would give it)."""
    return _constructor.construct_object(node, deep=True)


def describe(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    value = plain(node)
    return "null" if value is None else repr(value)


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(i?))?b?\s*$", re.IGNORECASE)
DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")


def parse_size(value: Any) -> Size | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return Size(value)
    if isinstance(value, str) and (m := _SIZE_RE.match(value)):
        unit, binary = (m.group(2) or "").lower(), bool(m.group(3))
        factor = (1024 if binary else 1000) ** (" kmgt".index(unit) if unit else 0)
        return Size(int(float(m.group(1)) * factor))
    return None


def parse_duration(value: Any) -> Duration | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return Duration(value)
    if isinstance(value, str) and (m := DURATION_RE.match(value)):
        return Duration(float(m.group(1)) * DURATION_UNITS[m.group(2)])
    return None


def type_name(tp: Any) -> str:
    """How an error message names what a key of annotation `tp` expects."""
    return _shape_name(shape_of(tp))


def _shape_name(shape: Shape) -> str:
    match shape:
        case Choice(values):
            return " | ".join(repr(v) for v in values)
        case OneOf(options):
            return " | ".join(_shape_name(o) for o in options)
        case ListOf(item):
            return f"list[{_shape_name(item)}]"
        case MappingOf(_, value):
            return f"mapping of {_shape_name(value)}"
        case Null():
            return "null"
        case Scalar(tp) if tp is Size:
            return "size (e.g. 64MiB)"
        case Scalar(tp) if tp is Duration:
            return "duration (e.g. 5s)"
        case Scalar(tp) | Nested(tp):
            return getattr(tp, "__name__", str(tp))
    return "Any"


def convert(node: yaml.Node, tp: Any, path: str, errors: Errors) -> Any:
    """Convert `node` to type `tp`; on failure record an error and return _INVALID."""
    return _convert(node, shape_of(tp), path, errors)


def _convert(node: yaml.Node, shape: Shape, path: str, errors: Errors) -> Any:
    def fail() -> Any:
        errors.add(node, path, f"expected {_shape_name(shape)}, got {describe(node)}")
        return _INVALID

    if getattr(node, "unexpanded", False):  # a ${VAR} not set: reported already
        return _INVALID
    match shape:
        case Anything():
            return plain(node)
        case OneOf(options):
            if isinstance(node, yaml.ScalarNode) and plain(node) is None and Null() in options:
                return None
            others = [o for o in options if o != Null()]
            if len(others) == 1:
                return _convert(node, others[0], path, errors)
            for option in others:
                trial = Errors(errors.file)
                value = _convert(node, option, path, trial)
                if not trial.items:
                    return value
            return fail()
        case Choice(values):
            if isinstance(node, yaml.ScalarNode) and plain(node) in values:
                return plain(node)
            return fail()
        case ListOf(item):
            if not isinstance(node, yaml.SequenceNode):
                return fail()
            items = [_convert(n, item, f"{path}[{i}]", errors) for i, n in enumerate(node.value)]
            return _INVALID if any(v is _INVALID for v in items) else items
        case MappingOf(_, value_shape):
            if not isinstance(node, yaml.MappingNode):
                return fail()
            out = {}
            for key_node, value_node in node.value:
                key = plain(key_node)
                out[str(key)] = _convert(value_node, value_shape, f"{path}.{key}", errors)
            return _INVALID if any(v is _INVALID for v in out.values()) else out
        case Nested(cls):
            built = build(cls, node, path, errors)
            return _INVALID if built is None else built
        case Scalar(tp) if isinstance(node, yaml.ScalarNode):
            return _scalar(node, tp, fail)
    return fail()


def _scalar(node: yaml.ScalarNode, tp: type, fail: Callable[[], Any]) -> Any:
    value = plain(node)
    if tp is Size:
        size = parse_size(value)
        return fail() if size is None else size
    if tp is Duration:
        duration = parse_duration(value)
        return fail() if duration is None else duration
    if tp is bool:
        return value if isinstance(value, bool) else fail()
    if tp is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else fail()
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if ok else fail()
    if tp is str:
        if getattr(node, "expanded", False):  # from ${VAR}: the text as the variable held it
            return node.value
        return value if isinstance(value, str) else fail()
    return fail()


def build(cls: type, node: yaml.Node, path: str, errors: Errors, skip: tuple[str, ...] = ()):
    """A `cls` dataclass instance from a mapping node, or None after recording errors.

    Keys in `skip` belong to the caller (e.g. `type`, `channels`) and are ignored."""
    before = len(errors)
    built, _ = build_partial(cls, node, path, errors, skip)
    return built if len(errors) == before else None


def build_partial(
    cls: type, node: yaml.Node, path: str, errors: Errors, skip: tuple[str, ...] = ()
) -> tuple[Any, frozenset[str]]:
    """Like `build`, but when some keys fail: (an instance from the keys that convert,
    defaults standing in for the others, the names of the keys that failed), so that
    checks of the good keys can run in the same pass. The instance is None when none
    can be made (not a mapping, a required key missing or broken). Every error is
    recorded; one from the constructor only when nothing else failed (a default
    standing in for a broken key may be what it complains about)."""
    if not isinstance(node, yaml.MappingNode):
        errors.add(node, path, f"expected a mapping, got {describe(node)}")
        return None, frozenset()
    fields = {f.name: f for f in config_fields(cls)}
    before = len(errors)
    values: dict[str, Any] = {}
    broken: set[str] = set()
    seen: set[str] = set()
    for key_node, value_node in node.value:
        key = plain(key_node)
        key_path = f"{path}.{key}" if path else str(key)
        if key in seen:
            errors.add(key_node, key_path, "duplicate key")
            continue
        seen.add(key)
        if key in skip:
            continue
        if key not in fields:
            errors.add(key_node, key_path, unknown_key_message(key, list(fields) + list(skip)))
            continue
        value = convert(value_node, fields[key].annotation, key_path, errors)
        if value is _INVALID:
            broken.add(key)
        else:
            values[key] = value
    missing = False
    for name, f in fields.items():
        if name not in values and f.required:
            missing = True
            if name not in seen:
                errors.add(node, f"{path}.{name}" if path else name, "missing required key")
    if missing:
        return None, frozenset(broken)
    try:
        return cls(**values), frozenset(broken)
    except (TypeError, ValueError) as exc:
        if len(errors) == before:
            errors.add(node, path, str(exc))
        return None, frozenset(broken)


def unknown_key_message(key: Any, known: list[str]) -> str:
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{hint}; known keys: {', '.join(sorted(known))}"


def key_node(mapping: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    """The (key, value) nodes of `key` in a mapping node, if present."""
    for k, v in mapping.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k, v
    return None
