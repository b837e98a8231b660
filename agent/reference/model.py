"""The model of the reference: every type of the plugin packages (and, when asked,
of the installed third-party plugins) with its keys, each key with its annotation,
default and meaning (the comment on its line)."""

from __future__ import annotations

import dataclasses
import inspect
import io
import sys
import textwrap
import tokenize
from dataclasses import field
from typing import Any

from agent.annotations import config_fields, nested_block, shape_of
from agent.api import REGISTRY, Interceptor
from agent.config import AgentSettings, SelectorConfig
from agent.plugins import BUILTIN, Origin, failed_plugins, load_plugins, origin

ORDER = ("source", "interceptor", "channel", "sink")  # the order of the sections

# The wiring keys of each kind (agent.config.WIRING_KEYS), declared like a Config so
# that they are documented like one. An interceptor item is annotated `Interceptor`.


@dataclasses.dataclass
class SourceWiring:
    type: str  # the source type: one of those below
    channels: list[str]  # names of the channels its events go to (at least one)
    interceptors: list[Interceptor] = field(default_factory=list)  # run in order on each batch
    selector: SelectorConfig = field(default_factory=SelectorConfig)  # which channels get an event


@dataclasses.dataclass
class InterceptorWiring:
    type: str  # the interceptor type: one of those below


@dataclasses.dataclass
class ChannelWiring:
    type: str  # the channel type: one of those below


@dataclasses.dataclass
class SinkWiring:
    type: str  # the sink type: one of those below
    channel: str  # name of the channel it takes events from


WIRING = {
    "source": SourceWiring,
    "interceptor": InterceptorWiring,
    "channel": ChannelWiring,
    "sink": SinkWiring,
}


class MissingPlugins(RuntimeError):
    """Plugin modules or plugins failed to load: a reference made now would lack their
    types."""


@dataclasses.dataclass(frozen=True)
class Key:
    """One key of a mapping: `keys` holds the keys of a nested mapping (dataclass)."""

    name: str
    annotation: Any
    required: bool
    default: Any  # the value (a default_factory called); None when required
    meaning: str  # "" when the field's line has no comment
    keys: tuple[Key, ...] = ()


@dataclasses.dataclass(frozen=True)
class ComponentType:
    kind: str
    name: str  # the primary type name
    aliases: tuple[str, ...]
    summary: str  # the first paragraph of the module's docstring
    module: str  # the file that implements it, e.g. sources/tail.py
    keys: tuple[Key, ...]  # the keys of its Config, without the wiring keys
    origin: Origin = BUILTIN  # or the third-party plugin it comes from


def field_comments(cls: type) -> dict[str, str]:
    """{field name: its trailing comment} for the fields `cls` itself declares.

    Read with `tokenize`, so that a `#` inside a string default is not a comment. A
    declaration is a logical line of the class body that starts with `name:`; its
    meaning is the first comment of that logical line, and a comment on a line of
    its own is nobody's."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[str, str] = {}
    depth = 0  # 1 inside the class body
    line: list[tokenize.TokenInfo] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.INDENT:
            depth += 1
        elif token.type == tokenize.DEDENT:
            depth -= 1
        elif token.type == tokenize.NEWLINE:
            code = [t for t in line if t.type != tokenize.COMMENT]
            notes = [t for t in line if t.type == tokenize.COMMENT]
            declares = len(code) >= 2 and code[0].type == tokenize.NAME and code[1].string == ":"
            if depth == 1 and declares:
                comments[code[0].string] = notes[0].string.lstrip("#").strip() if notes else ""
            line = []
        elif token.type == tokenize.COMMENT and not line:
            continue  # a comment on a line of its own, before a declaration: not its meaning
        elif token.type != tokenize.NL:
            line.append(token)
    return comments


def keys_of(cls: type) -> tuple[Key, ...]:
    """The keys of a Config dataclass, in declaration order, nested ones included."""
    comments: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if dataclasses.is_dataclass(base) and "__annotations__" in vars(base):
            comments.update(field_comments(base))
    keys = []
    for f in config_fields(cls):
        default = f.default_value()
        nested = nested_block(shape_of(f.annotation))
        sub = keys_of(nested) if nested is not None else ()
        keys.append(Key(f.name, f.annotation, f.required, default, comments.get(f.name, ""), sub))
    return tuple(keys)


def component_types(plugins: bool = False) -> list[ComponentType]:
    """Every type of the plugin packages, and with `plugins` those of the installed
    third-party plugins (agent/plugins.py), sorted by kind (ORDER) then name. Types
    registered by code loaded some other way (the tests' fakes) are never in it.
    Raises MissingPlugins when one of those it covers failed to load."""
    failures = load_plugins()
    if not plugins:
        failures = {k: v for k, v in failures.items() if k not in failed_plugins()}
    if failures:
        detail = "; ".join(f"{what}: {error}" for what, error in sorted(failures.items()))
        raise MissingPlugins(f"failed to load: {detail}")
    names: dict[type, tuple[Origin, list[str]]] = {}
    for (kind, name), cls in REGISTRY.items():
        where = origin(kind, name)
        if where is not None and (where.builtin or plugins):
            names.setdefault(cls, (where, []))[1].append(name)
    found = []
    for cls, (where, registered) in names.items():
        module = sys.modules[cls.__module__]
        found.append(
            ComponentType(
                kind=cls.kind,
                name=cls.type_name,
                aliases=tuple(sorted(n for n in registered if n != cls.type_name)),
                summary=" ".join((module.__doc__ or "").strip().split("\n\n")[0].split()),
                module=cls.__module__.replace(".", "/") + ".py",
                keys=keys_of(cls.Config),
                origin=where,
            )
        )
    return sorted(found, key=lambda t: (ORDER.index(t.kind), t.name))


def agent_keys() -> tuple[Key, ...]:
    """The settings of an agent, next to its sources, channels and sinks."""
    return keys_of(AgentSettings)


def wiring_keys(kind: str) -> tuple[Key, ...]:
    return keys_of(WIRING[kind])
