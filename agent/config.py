"""The pipeline compiler: pipelines.yaml -> validated `AgentSpec`s, or every error.

Shape of the file (Flume's model, Vector-like spelling):

    agents:
      <agent>:
        metrics: {listen: 127.0.0.1:8286}     # optional /metrics and /health
        shutdown_grace: 10s                   # optional, drain time on SIGTERM
        sources:
          <name>: {type: T, channels: [c1, ...], interceptors: [{type: T, ...}],
                   selector: {type: replicating | multiplexing, header|field: K,
                              mapping: {value: [c1]}, default: [c2]}, ...T's keys}
        channels:
          <name>: {type: T, ...T's keys}
        sinks:
          <name>: {type: T, channel: c1, ...T's keys}

Values may hold `${VAR}` and `${VAR:-default}`, expanded from the environment,
`${HOST}`, this machine's name even when the environment has no HOST
(common/hostname.py), and `${file:/path}`, a file's content (a secret such as a SASL
password, kept out of this file: common/envsubst.py), before anything else reads
them.

Compilation never stops at the first problem: names, types of every key (from the
component's `Config` dataclass), each class's own `validate` (on the keys that parsed,
even when others did not), port clashes
(`listen_ports` plus the metrics port), and the graph (dangling channel
references, channels no sink reads) are all checked, and each error carries
file:line:column and the dotted path of the key. The specs are plain frozen
dataclasses compared by value, which is how a SIGHUP reload finds what changed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import yaml

from agent.api import REGISTRY, Channel, Component, Duration, Interceptor, Sink, Source
from agent.plugins import load_plugins
from agent.schema import (
    ConfigError,
    Errors,
    build,
    build_partial,
    convert,
    describe,
    key_node,
    plain,
)
from agent.schema import unknown_key_message as unknown_key
from common.envsubst import UnreadableFile, UnsetVariable, expand
from common.hostname import this_host
from common.hostport import parse_hostport

SECTIONS = {"sources": "source", "channels": "channel", "sinks": "sink"}
WIRING_KEYS = {
    "source": ("type", "channels", "interceptors", "selector"),
    "channel": ("type",),
    "sink": ("type", "channel"),
    "interceptor": ("type",),
}


@dataclasses.dataclass(frozen=True)
class MetricsSettings:
    # 8286, next to the UDP source's 8285, is no well-known exporter's (9273 is Telegraf's)
    listen: str = "127.0.0.1:8286"  # host:port of /metrics, /health and /tap (on loopback only)


@dataclasses.dataclass(frozen=True)
class AgentSettings:
    metrics: MetricsSettings | None = None  # serve metrics and health; null: no server
    shutdown_grace: Duration = Duration(10)  # on SIGTERM, sinks drain the channels for at most this


@dataclasses.dataclass
class SelectorConfig:
    type: Literal["replicating", "multiplexing"] = "replicating"  # replicating: to every channel
    header: str | None = None  # multiplexing: route by the value of this header
    field: str | None = None  # multiplexing: route by this field of the parsed record
    mapping: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # value: [channels]
    default: list[str] = dataclasses.field(default_factory=list)  # for other values; []: dropped


C = TypeVar("C", bound=Component)


@dataclasses.dataclass(frozen=True)
class ComponentSpec(Generic[C]):
    name: str
    cls: type[C]
    config: Any


@dataclasses.dataclass(frozen=True)
class SourceSpec(ComponentSpec[Source]):
    channels: tuple[str, ...] = ()
    selector: SelectorConfig = dataclasses.field(default_factory=SelectorConfig)
    interceptors: tuple[ComponentSpec[Interceptor], ...] = ()


@dataclasses.dataclass(frozen=True)
class SinkSpec(ComponentSpec[Sink]):
    channel: str = ""


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    name: str
    settings: AgentSettings
    sources: dict[str, SourceSpec]
    channels: dict[str, ComponentSpec[Channel]]
    sinks: dict[str, SinkSpec]


def compile_file(
    path: str | Path, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, AgentSpec], list[ConfigError]]:
    """Compile a pipelines file; returns (agents, errors). Agents are valid only if
    errors is empty. `${VAR}` comes from `environ`, by default the process's."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        return {}, [ConfigError(str(path), 1, 1, "", f"cannot read: {exc.strerror}")]
    return compile_text(text, str(path), environ)


def compile_text(
    text: str, filename: str = "pipelines.yaml", environ: Mapping[str, str] | None = None
):
    errors = Errors(filename)
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = getattr(exc, "problem", None) or str(exc)
        return {}, [ConfigError(filename, line, col, "", f"invalid YAML: {problem}")]
    if root is None:
        return {}, [ConfigError(filename, 1, 1, "", "empty file; expected 'agents:'")]
    environ = os.environ if environ is None else environ
    _expand_env(root, "", errors, {**environ, "HOST": this_host(environ)})
    failures = load_plugins()
    agents: dict[str, AgentSpec] = {}
    if not isinstance(root, yaml.MappingNode):
        errors.add(root, "", f"expected a mapping with 'agents:', got {describe(root)}")
        return {}, errors.items
    for k, _v in root.value:
        if plain(k) != "agents":
            errors.add(k, str(plain(k)), unknown_key(plain(k), ["agents"]))
    found = key_node(root, "agents")
    if found is None:
        errors.add(root, "agents", "missing required key")
    elif not isinstance(found[1], yaml.MappingNode):
        errors.add(found[1], "agents", f"expected a mapping of agents, got {describe(found[1])}")
    else:
        for name_node, agent_node in found[1].value:
            name = str(plain(name_node))
            spec = _compile_agent(name, agent_node, errors, failures)
            if spec is not None:
                agents[name] = spec
    return (agents if not errors.items else {}), errors.items


def _expand_env(node: yaml.Node, path: str, errors: Errors, environ, seen=None) -> None:
    """Expand `${VAR}`, `${VAR:-default}` and `${file:/path}` (common.envsubst) in every value, in
    place, before anything reads them. An expanded value, quoted or not, takes the
    type its key asks for (`count: "${N}"` is an int, a str key keeps `${ZIP}` as
    written: agent.schema.convert); quotes are needed inside `{...}`, where a bare `{`
    is YAML syntax. A value, not the file's text, is expanded: what a variable holds
    (a password with `#` or `: `) can never change the file's structure. A node
    reached again through a YAML alias is expanded once."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            key_path = f"{path}.{plain(key)}" if path else str(plain(key))
            _expand_env(value, key_path, errors, environ, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _expand_env(item, f"{path}[{i}]", errors, environ, seen)
    elif isinstance(node, yaml.ScalarNode) and "$" in node.value:
        try:
            node.value = expand(node.value, environ)
        except UnsetVariable as e:
            errors.add(
                node,
                path,
                f"environment variable {e.name} is not set "
                f"(write ${{{e.name}:-default}} to give a default)",
            )
            node.unexpanded = True  # type: ignore[attr-defined]  # a mark on PyYAML's node
            return
        except UnreadableFile as e:
            errors.add(node, path, f"cannot read {e.path}: {e.reason}")
            node.unexpanded = True  # type: ignore[attr-defined]
            return
        node.tag = _RESOLVER.resolve(yaml.ScalarNode, node.value, (True, False))
        node.expanded = True  # type: ignore[attr-defined]


_RESOLVER = yaml.resolver.Resolver()


def _compile_agent(name, node, errors: Errors, failures) -> AgentSpec | None:
    path = f"agents.{name}"
    before = len(errors)
    settings = build(AgentSettings, node, path, errors, skip=tuple(SECTIONS))
    if not isinstance(node, yaml.MappingNode):
        return None
    sections: dict[str, dict] = {}
    nodes: dict[tuple[str, str], yaml.Node] = {}
    for section, kind in SECTIONS.items():
        sections[section] = {}
        found = key_node(node, section)
        if found is None:
            continue
        if not isinstance(found[1], yaml.MappingNode):
            errors.add(
                found[1], f"{path}.{section}", f"expected a mapping, got {describe(found[1])}"
            )
            continue
        for cname_node, cnode in found[1].value:
            cname = str(plain(cname_node))
            cpath = f"{path}.{section}.{cname}"
            nodes[(kind, cname)] = cnode
            spec = _compile_component(kind, cname, cnode, cpath, errors, failures)
            if spec is not None:
                sections[section][cname] = spec
    if settings is not None and settings.metrics is not None:
        metrics = _value_node(node, "metrics")
        assert isinstance(metrics, yaml.MappingNode)  # settings.metrics was parsed from it
        found = key_node(metrics, "listen")
        try:
            parse_hostport(settings.metrics.listen)
        except ValueError:
            if found:
                errors.add(found[1], f"{path}.metrics.listen", "expected host:port")
    _check_graph(path, node, sections, nodes, errors)
    _check_ports(path, settings, sections, nodes, errors)
    if len(errors) > before or settings is None:
        return None
    return AgentSpec(name, settings, sections["sources"], sections["channels"], sections["sinks"])


def _resolve(kind, node, path, errors: Errors, failures) -> type[Component] | None:
    found = key_node(node, "type")
    if found is None:
        errors.add(node, f"{path}.type", "missing required key")
        return None
    type_name = plain(found[1])
    cls = REGISTRY.get((kind, type_name)) if isinstance(type_name, str) else None
    if cls is None:
        known = sorted(t for k, t in REGISTRY if k == kind)
        msg = f"unknown {kind} type {type_name!r}; known: {', '.join(known) or 'none'}"
        if failures:  # modules of the plugin packages, and plugins (agent/plugins.py)
            msg += "; failed to load: " + "; ".join(
                f"{what}: {error}" for what, error in sorted(failures.items())
            )
        errors.add(found[1], f"{path}.type", msg)
    return cls


def _value_node(mapping: yaml.Node, key: str) -> yaml.Node:
    """The value node of `key` in `mapping`, which the compiled spec shows are there."""
    assert isinstance(mapping, yaml.MappingNode)
    found = key_node(mapping, key)
    assert found is not None
    return found[1]


def _compile_component(kind, name, node, path, errors: Errors, failures):
    if not isinstance(node, yaml.MappingNode):
        errors.add(node, path, f"expected a mapping, got {describe(node)}")
        return None
    before = len(errors)
    cls = _resolve(kind, node, path, errors, failures)
    if cls is None:
        # still check the wiring keys' shapes so their errors show up in this pass
        config = None
    else:
        config, broken = build_partial(cls.Config, node, path, errors, skip=WIRING_KEYS[kind])
        if config is not None:
            # with other errors, the keys that parsed are checked in this pass too; a
            # key is also broken when its ${VAR} or ${file:...} failed (reported before)
            failed = broken if broken or len(errors) > before else None
            _run_validate(cls, config, node, path, errors, failed)
    extra: dict[str, Any] = {}
    if kind == "source":
        extra = _source_wiring(node, path, errors, failures)
    elif kind == "sink":
        found = key_node(node, "channel")
        if found is None:
            errors.add(node, f"{path}.channel", "missing required key")
        else:
            extra["channel"] = convert(found[1], str, f"{path}.channel", errors)
    if len(errors) > before or cls is None or config is None:
        return None
    if kind == "source":
        assert issubclass(cls, Source)  # what @register("source", ...) takes
        return SourceSpec(name, cls, config, **extra)
    if kind == "sink":
        assert issubclass(cls, Sink)
        return SinkSpec(name, cls, config, **extra)
    return ComponentSpec(name, cls, config)


def _run_validate(
    cls, config, node, path, errors: Errors, broken: frozenset[str] | None = None
) -> None:
    """The component's own checks. `broken`: keys that failed to parse and stand at
    their defaults in `config`; then only findings about other keys are reported,
    since a finding about a default standing in for a broken key means nothing."""
    try:
        problems = cls.validate(config)
    except Exception as exc:  # a plugin bug is reported as a config error, not a crash
        problems = [f"validate() raised {type(exc).__name__}: {exc}"]
    fields = {f.name for f in dataclasses.fields(config)}
    for message in problems:
        key, sep, rest = message.partition(":")
        key = key.strip()
        head, _, sub = key.partition(".")  # `tls.ca: ...` names a key of a block
        if broken is not None and (head in broken or not (sep and head in fields)):
            continue
        if sep and head in fields:
            found = key_node(node, head)
            if found and sub and isinstance(found[1], yaml.MappingNode):
                found = key_node(found[1], sub) or found
            errors.add(found[1] if found else node, f"{path}.{key}", rest.strip())
        else:
            errors.add(node, path, message)


def _source_wiring(node, path, errors: Errors, failures) -> dict[str, Any]:
    out: dict[str, Any] = {}
    found = key_node(node, "channels")
    if found is None:
        errors.add(node, f"{path}.channels", "missing required key")
    else:
        channels = convert(found[1], list[str], f"{path}.channels", errors)
        if isinstance(channels, list):
            if not channels:
                errors.add(found[1], f"{path}.channels", "needs at least one channel")
            out["channels"] = tuple(channels)
    found = key_node(node, "selector")
    if found is not None:
        selector = build(SelectorConfig, found[1], f"{path}.selector", errors)
        if selector is not None:
            spath = f"{path}.selector"
            if selector.type == "multiplexing" and (selector.header is None) == (
                selector.field is None
            ):
                errors.add(found[1], spath, "multiplexing needs exactly one of header, field")
            if selector.type == "replicating" and (selector.mapping or selector.default):
                errors.add(found[1], spath, "mapping/default need type: multiplexing")
            out["selector"] = selector
    interceptors = []
    found = key_node(node, "interceptors")
    if found is not None:
        if not isinstance(found[1], yaml.SequenceNode):
            errors.add(
                found[1], f"{path}.interceptors", f"expected a list, got {describe(found[1])}"
            )
        else:
            for i, inode in enumerate(found[1].value):
                ipath = f"{path}.interceptors[{i}]"
                spec = _compile_component("interceptor", str(i), inode, ipath, errors, failures)
                interceptors.append(spec)
    out["interceptors"] = tuple(interceptors)
    return out


def _check_graph(path, agent_node, sections, nodes, errors: Errors) -> None:
    """Channel references, read from the raw nodes so that a component with other
    errors still counts as reading or writing its channels."""
    declared = {name for kind, name in nodes if kind == "channel"}
    read = set()
    for (kind, name), cnode in nodes.items():
        if kind == "sink" and (found := key_node(cnode, "channel")):
            channel = plain(found[1])
            read.add(channel)
            if isinstance(channel, str) and channel not in declared:
                errors.add(found[1], f"{path}.sinks.{name}.channel", _dangling(channel, declared))
        if kind == "source" and (found := key_node(cnode, "channels")):
            if not isinstance(found[1], yaml.SequenceNode):
                continue
            for i, item in enumerate(found[1].value):
                channel = plain(item)
                if isinstance(channel, str) and channel not in declared:
                    where = f"{path}.sources.{name}.channels[{i}]"
                    errors.add(item, where, _dangling(channel, declared))
    for name, spec in sections["sources"].items():
        sel = spec.selector
        for value, targets in [*sel.mapping.items(), ("default", sel.default)]:
            for channel in targets:
                if channel not in spec.channels:
                    errors.add(
                        _value_node(nodes[("source", name)], "selector"),
                        f"{path}.sources.{name}.selector",
                        f"{value!r} routes to {channel!r}, which is not in this source's channels",
                    )
    for name in sorted(declared - read):
        errors.add(
            nodes[("channel", name)], f"{path}.channels.{name}", "no sink reads this channel"
        )
    _check_positions_sinks(path, sections, nodes, errors)


def _check_positions_sinks(path, sections, nodes, errors: Errors) -> None:
    """A sink that records positions (exactly_once) must be its channel's only reader:
    the positions it records are the channel's and its sources' as a whole."""
    sinks = sections["sinks"]
    for name, spec in sinks.items():
        if not spec.cls.records_positions(spec.config):
            continue
        others = sorted(n for n, s in sinks.items() if n != name and s.channel == spec.channel)
        if others:
            errors.add(
                _value_node(nodes[("sink", name)], "channel"),
                f"{path}.sinks.{name}.channel",
                f"delivery: exactly_once needs a channel of its own; "
                f"{', '.join(others)} also read{'s' if len(others) == 1 else ''} "
                f"{spec.channel!r}",
            )


def _dangling(channel: str, declared: set[str]) -> str:
    known = ", ".join(sorted(declared)) or "none declared"
    return f"unknown channel {channel!r} (channels: {known})"


def _check_ports(path, settings, sections, nodes, errors: Errors) -> None:
    taken: dict[tuple[str, int], str] = {}
    if settings is not None and settings.metrics is not None:
        try:
            taken[("tcp", parse_hostport(settings.metrics.listen)[1])] = f"{path}.metrics"
        except ValueError:
            pass  # reported by the caller
    for name, spec in sections["sources"].items():
        try:
            ports = spec.cls.listen_ports(spec.config)
        except Exception as exc:
            errors.add(
                nodes[("source", name)], f"{path}.sources.{name}", f"listen_ports() raised {exc!r}"
            )
            continue
        for proto, port in ports:
            key = (proto.lower().replace("http", "tcp"), port)
            where = f"{path}.sources.{name}"
            if port and key in taken:
                errors.add(
                    nodes[("source", name)],
                    where,
                    f"{proto} port {port} already used by {taken[key]}",
                )
            taken.setdefault(key, where)
