"""The reference of pipelines.yaml, generated from the code that reads the file.

Why generated: the keys a component accepts are the fields of its `Config`
dataclass (agent/schema.py turns YAML into it), so a reference written by hand
drifts from them with every new key. This module reads the registry instead. For
each type it takes every key, its YAML type and its default from the dataclass
fields, and its meaning from the trailing `# comment` on the field's line: the one
place where a developer documents a key, next to its declaration. The agent's own
settings (`AgentSettings`) and the wiring keys every component of a kind takes
(`WIRING`, below) are read the same way.

Two renderers share that model: `markdown()` for CONFIGURATION.md, and
`json_schema()` for pipelines.schema.json, with which editors complete and check
the file. `logflume agent reference` writes either (`render`);
tests/agent/test_reference.py fails when a key has no comment or when the
checked-in files differ from what this module produces.

Only the types of the plugin packages (agent.plugins.PLUGIN_PACKAGES) are in the
reference: other code loaded in the same process, such as the test plugins, may
register types too.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import sys
import textwrap
import tokenize
from dataclasses import field
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
    nested_block,
    shape_of,
)
from agent.api import REGISTRY, Duration, Interceptor, Size
from agent.config import SECTIONS, AgentSettings, SelectorConfig
from agent.plugins import PLUGIN_PACKAGES, load_plugins
from agent.schema import DURATION_RE
from agent.writer import yaml_value

FORMATS = ("markdown", "json-schema")
ORDER = ("source", "interceptor", "channel", "sink")  # the order of the Markdown sections
TITLES = {
    "source": "Sources",
    "interceptor": "Interceptors",
    "channel": "Channels",
    "sink": "Sinks",
}
WHERE = {
    "source": "under `sources:`, by name",
    "interceptor": "in a source's `interceptors:` list, applied in order",
    "channel": "under `channels:`, by name",
    "sink": "under `sinks:`, by name",
}


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
    """Plugin modules failed to import: a reference made now would lack their types."""


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


# ---------------------------------------------------------------- the model


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


def component_types() -> list[ComponentType]:
    """Every type of the plugin packages, sorted by kind (ORDER) then name."""
    failures = load_plugins()
    if failures:
        detail = "; ".join(f"{module}: {error}" for module, error in sorted(failures.items()))
        raise MissingPlugins(f"plugin modules failed to import: {detail}")
    names: dict[type, list[str]] = {}
    for (_kind, name), cls in REGISTRY.items():
        if cls.__module__.startswith(tuple(f"{p}." for p in PLUGIN_PACKAGES)):
            names.setdefault(cls, []).append(name)
    found = []
    for cls, registered in names.items():
        module = sys.modules[cls.__module__]
        found.append(
            ComponentType(
                kind=cls.kind,
                name=cls.type_name,
                aliases=tuple(sorted(n for n in registered if n != cls.type_name)),
                summary=" ".join((module.__doc__ or "").strip().split("\n\n")[0].split()),
                module=cls.__module__.replace(".", "/") + ".py",
                keys=keys_of(cls.Config),
            )
        )
    return sorted(found, key=lambda t: (ORDER.index(t.kind), t.name))


def agent_keys() -> tuple[Key, ...]:
    """The settings of an agent, next to its sources, channels and sinks."""
    return keys_of(AgentSettings)


def wiring_keys(kind: str) -> tuple[Key, ...]:
    return keys_of(WIRING[kind])


# ---------------------------------------------------------------- YAML text

_TYPE_NAMES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    Size: "size",
    Duration: "duration",
    Interceptor: "interceptor",
}


def yaml_type(tp: Any) -> str:
    """The YAML type of an annotation in words: "list of string", "duration"..."""
    return _yaml_type(shape_of(tp))


def _yaml_type(shape: Shape) -> str:
    match shape:
        case OneOf(options):
            words = " or ".join(_yaml_type(o) for o in options if o != Null())
            return f"{words} or null" if Null() in options else words
        case Choice(values):
            return "one of: " + ", ".join(yaml_text(v) for v in values)
        case ListOf(item):
            return f"list of {_yaml_type(item)}"
        case MappingOf(key, value):
            return f"mapping of {_yaml_type(key)} to {_yaml_type(value)}"
        case Nested():
            return "mapping"
        case Anything():
            return "any"
        case Scalar(tp) if tp in _TYPE_NAMES:
            return _TYPE_NAMES[tp]
    raise TypeError(f"the reference has no YAML type for {shape!r}: add it to agent/reference.py")


def yaml_text(value: Any) -> str:
    """`value` in YAML flow style, quoted only where YAML needs it."""
    text = yaml.safe_dump(yaml_value(value), default_flow_style=True, width=sys.maxsize)
    return text.removesuffix("...\n").strip()


# ---------------------------------------------------------------- Markdown

_INTRO = """\
# pipelines.yaml reference

<!-- Generated by `logflume agent reference --output CONFIGURATION.md` from the
comments on the Config fields in the code: edit those, then regenerate. -->

Every key of the file that configures logflume's log agents. `logflume agent run`
and `logflume agent validate` read `pipelines.yaml` in the working directory, or
the file `--config FILE` names; an agent installed with deploy/install-agent.sh
reads `/etc/logflume/pipelines.yaml`, installed from the production web host's
template, `deploy/agent/pipelines.yaml`. The repository's `pipelines.yaml` is the
demo's pipeline (`make up`).

```yaml
agents:
  <agent>:                       # logflume agent run --name <agent>
    metrics: {listen: 127.0.0.1:8286}
    shutdown_grace: 10s
    sources:
      <name>: {type: <source type>, channels: [<channel>], ...}
    channels:
      <name>: {type: <channel type>, ...}
    sinks:
      <name>: {type: <sink type>, channel: <channel>, ...}
```

Each component is a mapping: `type` picks the implementation, the wiring keys
connect it (a source's `channels`, a sink's `channel`), and the other keys are
those of its type, below. An unknown key, a wrong type or a missing required key
is an error that names the file, line and key.

## Environment variables

Any value may refer to the environment: `${NAME}` is replaced by the variable's
value (an error when it is not set), `${NAME:-default}` by `default` when NAME is
unset or empty, and `$$` is a literal `$`. Values are replaced before they are
typed, so `capacity: ${CAPACITY}` is an integer when CAPACITY holds one. Inside a
flow mapping, quote the value: `{listen: "${LISTEN}"}`.

The systemd unit of deploy/ reads variables from `/etc/logflume/agent.env`
(`EnvironmentFile=`). `logflume agent validate --env-file FILE` checks a file with
the variables of such a file, so the settings can be checked before the service
starts:

```sh
logflume agent validate --config /etc/logflume/pipelines.yaml --env-file /etc/logflume/agent.env
```

`logflume agent run --env-file FILE` puts them into the agent's environment, as
systemd does. Variables of the file win over the environment. The syntax is
systemd's: `NAME=value` lines, blank lines and comment lines starting with `#` or
`;`; the value may be in single quotes (kept as written) or double quotes (where
`\\"`, `\\\\`, `\\$` and `` \\` `` stand for the second character); nothing in it is
expanded. A line that is no such assignment (`export NAME=value` included), a quote
left open and a backslash ending a line (no continuation lines) are errors naming
the file and line; so is a missing file.

`${file:/path}` is replaced by the content of a file, less one trailing newline:
a secret such as the kafka sink's `sasl.password` can live in a file only the
agent can read (systemd's `LoadCredential=`, a Kubernetes secret volume) instead
of in pipelines.yaml. An unreadable file is an error naming the key and line.

## This host's name: `${HOST}`

One pipelines.yaml is usually installed on many web hosts. `${HOST}` is always
defined: this machine's name, which is the environment's `HOST` when it is set and
not empty (set it in `/etc/logflume/agent.env` to choose another name), else the
kernel's host name (`hostname`). The same name is what `add_host: true` (header
`host`) and `add_fields` with `host: true` add to events, and what the kafka
sink's default `transactional_id` holds: `logflume-<host>-<agent>-<sink>`, so that
hosts installed from one file never fence each other's exactly-once transactions
or resume from each other's positions.

Upgrading an exactly-once agent: up to this version the default transactional id
was `logflume-<agent>-<sink>`, and the committed positions in `positions_topic` are
kept under the id. An agent that relied on that default finds no positions under
its new id: its sources resume from their own position files, which may lag the
broker, and the `file` channel replays what it holds, so the lines of the last
moments before the upgrade can arrive twice. To keep its positions, set the old id
explicitly before upgrading: `transactional_id: logflume-<agent>-<sink>`.

## Kafka topics, keys and headers

The kafka sink's `topic` and `key` are templates: text with placeholders `{name}`,
as Vector's and Filebeat's Kafka outputs allow. `topic: "nginx-{host}"` sends each
record to the topic of its host, `key: "{host}"` keys it by host. A placeholder
takes the event's value of `name`: the parsed record's top-level field `name` when
the record has it and it is not null (a string as it is, a number or boolean as
JSON writes it), else the event's header `name` (`host`, `source`, `path`, or one
set by `add_fields`). Names are letters, digits and `_ . - @`; quote a template in
YAML (`{` starts a flow mapping). A topic with no placeholder costs nothing per
record. A record whose template names a missing field, or whose topic comes out as
no valid topic name, goes to the dead-letter topic with header `x-error:
MISSING_FIELD: <name> (<key> <template>)` (or `INVALID_TOPIC: ...`) and
`x-topic` (the template when the topic could not be made), and is counted in
`logflume_agent_broker_dead_lettered_total`. With a templated topic,
`dead_letter_topic` must be set (a plain topic name). A malformed template is an
error of `logflume agent validate` naming the key and line. (`key` replaces
`key_header: X` and `key_field: X` of earlier versions: write `key: "{X}"`.)

Record headers: the event headers named in the sink's `headers` list (default
`[host]`) become Kafka record headers, UTF-8 values, for each event that has them;
`headers: []` sends none. So `add_host: true` on a source reaches the broker as a
`host` header, which the Spark jobs read when the record has no `host` field.
Dead-lettered records keep their headers and get `x-error`, `x-topic` and `x-size`
besides.

## Editor support

[`pipelines.schema.json`](pipelines.schema.json) is a JSON Schema of the file. In
VS Code with the YAML extension (or any editor using yaml-language-server), start
pipelines.yaml with this line, the path being relative to the YAML file (or a URL):

```yaml
# yaml-language-server: $schema=./pipelines.schema.json
```

and the editor completes keys and type names, shows each key's meaning on hover,
and marks unknown keys and wrong types. The schema checks keys and types only:
`logflume agent validate` also checks paths, ports, patterns and the wiring
between components.

## Regenerating

This file and the schema are generated from the code (agent/reference.py); a test
fails when they are out of date:

```sh
logflume agent reference --output CONFIGURATION.md
logflume agent reference --format json-schema --output pipelines.schema.json
```

## Value types

| Type | Written as |
|---|---|
| string | text; quote it when YAML would read another type (`"0123"`, `"true"`) |
| integer | `1000` |
| number | `0.5` or `2` |
| boolean | `true` or `false` |
| size | bytes: an integer, or a number with a unit: `512k`, `64MiB`, `1.5GB` \
(k, M, G, T are powers of 1000; Ki, Mi, Gi, Ti of 1024; the B is optional) |
| duration | seconds: a number, or a number with a unit: `250ms`, `5s`, `2m`, `1h`, `1d` |
| list of X | `[a, b]`, or one `- item` per line |
| mapping | `{key: value}`, or one `key: value` per line |
| null | `null`, `~`, or nothing after the colon |
"""


def markdown() -> str:
    """CONFIGURATION.md: the intro, then every key of an agent and of each type."""
    found = component_types()
    out = [_INTRO, "## Contents", ""]
    out.append("- [Agent settings](#agent-settings)")
    for kind in ORDER:
        links = ", ".join(
            f"[`{t.name}`](#{kind}-{t.name.lower()})" for t in found if t.kind == kind
        )
        out.append(f"- [{TITLES[kind]}](#{TITLES[kind].lower()}): {links}")
    out += ["", "## Agent settings", ""]
    out.append("The keys of each agent, next to its `sources`, `channels` and `sinks`:")
    out += ["", *_table(agent_keys())]
    for kind in ORDER:
        out += ["", f"## {TITLES[kind]}", ""]
        out.append(f"Each {kind} is a mapping {WHERE[kind]}. The keys every {kind} takes:")
        out += ["", *_table(wiring_keys(kind))]
        for t in [t for t in found if t.kind == kind]:
            out += ["", f"### {kind.capitalize()} `{t.name}`", "", _escape(t.summary), ""]
            also = "".join(f" Also written `type: {alias}`." for alias in t.aliases)
            out.append(f"Code: [`{t.module}`]({t.module}).{also}")
            if t.keys:
                out += ["", *_table(t.keys)]
            else:
                out += ["", "No keys besides the wiring keys above."]
    return "\n".join(out) + "\n"


def _table(keys: tuple[Key, ...]) -> list[str]:
    rows = ["| Key | Type | Default | Meaning |", "|---|---|---|---|"]
    for key, name in _flatten(keys, ""):
        default = "required" if key.required else f"`{yaml_text(key.default)}`"
        cells = (f"`{name}`", yaml_type(key.annotation), default, _escape(key.meaning))
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return rows


def _escape(text: str) -> str:
    """Markdown's special characters in `text` made literal, outside `code` spans
    (where they already are), so that a `<` in a meaning does not open an HTML tag."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        parts[i] = "".join("\\" + c if c in "\\*_<[]" else c for c in parts[i])
    return "`".join(parts)


def _flatten(keys: tuple[Key, ...], prefix: str):
    """(key, dotted name) of `keys` and of the keys nested in them, depth first."""
    for key in keys:
        yield key, prefix + key.name
        yield from _flatten(key.keys, f"{prefix}{key.name}.")


# ---------------------------------------------------------------- JSON Schema

ENV = {"$ref": "#/$defs/env"}
# The texts agent.schema.parse_size and parse_duration accept, as ECMA 262 patterns
# (JSON Schema has no flags: the units' case is spelled out).
SIZE_PATTERN = r"^\s*\d+(\.\d+)?\s*([kKmMgGtT][iI]?)?[bB]?\s*$"
DURATION_PATTERN = DURATION_RE.pattern  # also a valid JSON Schema (ECMA-262) pattern


def json_schema() -> dict:
    """A JSON Schema (draft 2020-12) of pipelines.yaml.

    Each kind is a `$defs` entry that requires `type` and, through `allOf` of
    `if`/`then`, applies the schema of the type named: all its keys (wiring keys
    included), with `additionalProperties: false`. A `type` given as `${VAR}`
    matches no `if`, so only the kind's schema applies. Any scalar may also be a
    string holding `${`, as environment references are expanded before typing."""
    found = component_types()
    defs: dict[str, Any] = {
        "env": {
            "description": "an environment or file reference: ${NAME}, ${NAME:-default}, ${file:/path}",
            "type": "string",
            "pattern": r"\$\{",
        },
        "size": {
            "description": "bytes: an integer, or a number with a unit (512k, 64MiB, 1.5GB)",
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": SIZE_PATTERN},
                ENV,
            ],
        },
        "duration": {
            "description": "seconds: a number, or a number with a unit (250ms, 5s, 2m, 1h, 1d)",
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": DURATION_PATTERN},
                ENV,
            ],
        },
        "agent": _agent_schema(),
    }
    for kind in ORDER:
        of_kind = [t for t in found if t.kind == kind]
        names = [n for t in of_kind for n in (t.name, *t.aliases)]
        defs[kind] = {
            "type": "object",
            "properties": {
                "type": {"description": f"the {kind} type", "anyOf": [{"enum": names}, ENV]}
            },
            "required": ["type"],
            "allOf": [
                {
                    "if": {
                        "properties": {"type": {"enum": [t.name, *t.aliases]}},
                        "required": ["type"],
                    },
                    "then": {"$ref": f"#/$defs/{kind}.{t.name}"},
                }
                for t in of_kind
            ],
        }
        for t in of_kind:
            defs[f"{kind}.{t.name}"] = _type_schema(t)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "logflume pipelines.yaml",
        "description": "Generated by `logflume agent reference --format json-schema`; "
        "the keys are described in CONFIGURATION.md.",
        "type": "object",
        "properties": {
            "agents": {
                "description": "the agents, by name (logflume agent run --name NAME)",
                "type": "object",
                "additionalProperties": {"$ref": "#/$defs/agent"},
            }
        },
        "required": ["agents"],
        "additionalProperties": False,
        "$defs": defs,
    }


def _agent_schema() -> dict:
    properties = {key.name: _key_schema(key) for key in agent_keys()}
    for section, kind in SECTIONS.items():
        properties[section] = {
            "description": f"the agent's {section}, by name",
            "type": "object",
            "additionalProperties": {"$ref": f"#/$defs/{kind}"},
        }
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _type_schema(t: ComponentType) -> dict:
    schema = _object_schema((*wiring_keys(t.kind), *t.keys))
    schema["properties"]["type"] = {
        "description": f"the {t.kind} type",
        "enum": [t.name, *t.aliases],
    }
    return {"title": f"{t.kind} {t.name}", "description": t.summary, **schema}


def _object_schema(keys: tuple[Key, ...]) -> dict:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {key.name: _key_schema(key) for key in keys},
    }
    required = [key.name for key in keys if key.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _key_schema(key: Key) -> dict:
    shape = shape_of(key.annotation)
    if nested_block(shape) is not None:
        optional = isinstance(shape, OneOf)
        mapping = _object_schema(key.keys)
        schema = {"anyOf": [{"type": "null"}, mapping]} if optional else mapping
    else:
        schema = value_schema(key.annotation)
    schema = {"description": key.meaning, **schema}
    if not key.required:
        schema["default"] = yaml_value(key.default)
    return schema


def value_schema(tp: Any) -> dict:
    """The JSON Schema of one value of type `tp` (a nested dataclass excepted: its
    keys are in `Key.keys`)."""
    return _value_schema(shape_of(tp))


_JSON_SCALARS = {bool: "boolean", int: "integer", float: "number"}
_REFS = {Size: "size", Duration: "duration", Interceptor: "interceptor"}


def _value_schema(shape: Shape) -> dict:
    match shape:
        case OneOf(options):
            schemas = [_value_schema(o) for o in options]
            flat = [s for schema in schemas for s in schema.get("anyOf", [schema])]
            return {"anyOf": [s for i, s in enumerate(flat) if s not in flat[:i]]}
        case Null():
            return {"type": "null"}
        case Choice(values):
            return {"anyOf": [{"enum": list(values)}, ENV]}
        case ListOf(item):
            return {"type": "array", "items": _value_schema(item)}
        case MappingOf(_, value):
            return {"type": "object", "additionalProperties": _value_schema(value)}
        case Anything():
            return {}
        case Scalar(tp) if tp in _JSON_SCALARS:
            return {"anyOf": [{"type": _JSON_SCALARS[tp]}, ENV]}
        case Scalar(tp) if tp in _REFS:
            return {"$ref": f"#/$defs/{_REFS[tp]}"}
        case Scalar(tp) if tp is str:
            return {"type": "string"}
    raise TypeError(f"the reference has no JSON schema for {shape!r}: add it to agent/reference.py")


def render(fmt: str) -> str:
    """The text of the reference in `fmt` (one of FORMATS), as the files hold it."""
    if fmt == "markdown":
        return markdown()
    if fmt == "json-schema":
        return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    raise ValueError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
