"""`logflume agent run|validate|test-output|top|tap|reference|plugins`: run one agent
of pipelines.yaml, check the file, check that its kafka sinks could deliver
(logflume/sink_check.py), watch a running agent's components (logflume/agent_top.py)
or sample their events (logflume/agent_tap.py), print the reference of its keys
(CONFIGURATION.md, pipelines.schema.json), or list the component types installed,
built-in and from plugins (agent/plugins.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from logflume.table import add_output_argument


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("agent", help="run or validate log agents (pipelines.yaml)")
    sub = parser.add_subparsers(dest="agent_command", metavar="ACTION", required=True)
    run_p = sub.add_parser("run", help="run one agent until SIGTERM (SIGHUP reloads the file)")
    run_p.add_argument("--config", default="pipelines.yaml", help="pipelines file")
    run_p.add_argument("--name", help="agent to run (may be omitted if the file has one)")
    run_p.add_argument(
        "--state-dir",
        help="read positions and file channels (default: /var/lib/logflume/agent-<name> as "
        "root, as the systemd unit has it; else $XDG_STATE_HOME/logflume/agent-<name>)",
    )
    add_env_file_argument(run_p)
    run_p.set_defaults(func=run)
    val_p = sub.add_parser("validate", help="check a pipelines file; print every error")
    val_p.add_argument("--config", default="pipelines.yaml", help="pipelines file")
    add_env_file_argument(val_p)
    val_p.set_defaults(func=validate)
    out_p = sub.add_parser(
        "test-output",
        help="connect each kafka sink as it would (TLS, SASL), check its topics exist and "
        "allow WRITE, and an exactly-once sink's transactional id; one line per sink; "
        "exit 0 all ok, 1 a sink failed, 2 a bad pipelines file",
    )
    out_p.add_argument("--config", default="pipelines.yaml", help="pipelines file")
    out_p.add_argument("--name", help="check this agent's sinks only (default: every agent's)")
    out_p.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for each answer (10)"
    )
    add_env_file_argument(out_p)
    add_output_argument(
        out_p, help="text: one line per sink (the default); json: an array, one object per sink"
    )
    out_p.set_defaults(func=test_output)
    top_p = sub.add_parser(
        "top",
        help="a running agent's components, live from its /metrics: kind, type, events "
        "in and out per second, errors, channel fill",
    )
    add_agent_url_arguments(top_p)
    top_p.add_argument(
        "--interval", type=float, default=1.0, help="seconds between frames (default 1)"
    )
    top_p.add_argument("--once", action="store_true", help="print one frame and exit")
    add_output_argument(
        top_p, help="text: a table (the default); json: the rows of a frame (with --once)"
    )
    top_p.set_defaults(func=top)
    tap_p = sub.add_parser(
        "tap",
        help="print events sampled from one component of a running agent (its metrics "
        "listener must be on a loopback address: the events show log content)",
    )
    add_agent_url_arguments(tap_p)
    tap_p.add_argument(
        "--component",
        required=True,
        help="a source (its events after its interceptors), a channel (as put into it) "
        "or a sink (its input: its channel's events)",
    )
    tap_p.add_argument(
        "--limit", type=int, default=100, help="stop after this many events (default 100)"
    )
    tap_p.add_argument(
        "--format",
        choices=("json", "text"),
        default="text",
        help="text: time, component, headers and line (the default); json: the agent's JSON lines",
    )
    tap_p.set_defaults(func=tap)
    ref_p = sub.add_parser(
        "reference", help="print the reference of pipelines.yaml keys (Markdown or JSON Schema)"
    )
    ref_p.add_argument(
        "--format",
        choices=("markdown", "json-schema"),
        default="markdown",
        help="markdown (CONFIGURATION.md, the default) or json-schema (pipelines.schema.json)",
    )
    ref_p.add_argument("--output", metavar="FILE", help="write to FILE instead of stdout")
    ref_p.add_argument(
        "--builtin-only",
        action="store_true",
        help="leave out the types of installed plugins (entry points logflume.plugins), "
        "as the checked-in CONFIGURATION.md and pipelines.schema.json do",
    )
    ref_p.set_defaults(func=reference)
    plugins_p = sub.add_parser(
        "plugins",
        help="list the source, interceptor, channel and sink types installed, each with "
        "where it comes from (built-in, or a plugin's distribution and version), and the "
        "plugins that failed to load (then exit 1)",
    )
    add_output_argument(
        plugins_p,
        help="text: a table (the default); json: an array of objects, one per type; "
        "failures go to stderr either way",
    )
    plugins_p.set_defaults(func=plugins)


def add_env_file_argument(parser) -> None:
    parser.add_argument(
        "--env-file",
        metavar="FILE",
        help="take variables for ${NAME} in the pipelines file from FILE too, as the "
        "systemd unit does with its EnvironmentFile= (/etc/logflume/agent.env): NAME=value "
        "lines, # and ; comments, values optionally quoted; FILE wins over the environment",
    )


def add_agent_url_arguments(parser) -> None:
    parser.add_argument(
        "--url",
        help="the agent's metrics listener, http://HOST:PORT (default: from --config's "
        "metrics.listen, else http://127.0.0.1:8286)",
    )
    parser.add_argument("--config", help="pipelines file to take the agent's metrics.listen from")
    parser.add_argument("--name", help="agent of --config (may be omitted if the file has one)")
    add_env_file_argument(parser)


def agent_url(args: argparse.Namespace) -> str | None:
    """The base URL of the agent's metrics listener, from --url or --config; None
    (said on stderr) when the file names none."""
    if args.url:
        # the page's own URL (.../metrics, .../tap, as Prometheus scrapes it) names the
        # listener too; HOST:PORT alone is fine
        url = args.url.rstrip("/").removesuffix("/metrics").removesuffix("/tap")
        return url if "://" in url else f"http://{url}"
    if not args.config:
        return "http://127.0.0.1:8286"
    from common.hostport import parse_hostport

    variables = _env_file(args.env_file)
    if variables is None:
        return None
    agents, errors = _compile(args.config, {**os.environ, **variables})
    if errors:
        return None
    name = args.name if args.name is not None or len(agents) != 1 else next(iter(agents))
    if name not in agents:
        print(f"no agent {name!r} in {args.config}; agents: {', '.join(agents)}", file=sys.stderr)
        return None
    metrics = agents[name].settings.metrics
    if metrics is None:
        print(f"agent {name} of {args.config} serves no metrics (metrics: null)", file=sys.stderr)
        return None
    host, port = parse_hostport(metrics.listen)
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def default_state_dir(name: str, euid: int, environ: Mapping[str, str], home: Path) -> Path:
    """Where an agent keeps its state unless told: an absolute path that does not
    depend on the directory it was started from (a relative default made an agent
    started elsewhere silently start without its positions). Root gets the systemd
    unit's directory, so a hand-started agent resumes where the service stopped."""
    if euid == 0:
        return Path("/var/lib/logflume") / f"agent-{name}"
    base = environ.get("XDG_STATE_HOME") or str(home / ".local" / "state")
    return Path(base) / "logflume" / f"agent-{name}"


def _compile(path: str, environ: Mapping[str, str] | None = None):
    from agent.config import compile_file

    agents, errors = compile_file(path, environ)
    for error in errors:
        print(error, file=sys.stderr)
    return agents, errors


def _plugin_types_used(agents) -> list[str]:
    """`interceptor upper (site-plugins 1.0)` for each plugin type the agents use."""
    from agent.plugins import origin

    classes = set()
    for spec in agents.values():
        for source in spec.sources.values():
            classes.add(source.cls)
            classes.update(i.cls for i in source.interceptors)
        classes.update(c.cls for c in spec.channels.values())
        classes.update(s.cls for s in spec.sinks.values())
    used = []
    for cls in classes:
        where = origin(cls.kind, cls.type_name)
        if where is not None and not where.builtin:
            used.append((cls.kind, cls.type_name, where.provider))
    return [f"{kind} {name} ({provider})" for kind, name, provider in sorted(used)]


def _env_file(path: str | None) -> dict[str, str] | None:
    """The variables of `--env-file` ({} without one); None when the file is missing
    or malformed, which is said on stderr."""
    from common.envfile import EnvFileError, read_env_file

    try:
        return read_env_file(path) if path else {}
    except EnvFileError as e:
        print(e, file=sys.stderr)
        return None


def validate(args: argparse.Namespace) -> int:
    from agent.plugins import failed_plugins

    variables = _env_file(args.env_file)
    if variables is None:
        return 1
    for what, error in sorted(failed_plugins().items()):  # loads them: before the errors
        print(f"warning: {what} failed to load: {error}", file=sys.stderr)
    agents, errors = _compile(args.config, {**os.environ, **variables})
    if errors:
        print(f"{len(errors)} error(s) in {args.config}", file=sys.stderr)
        return 1
    print(f"OK: agents {', '.join(agents)}")
    used = _plugin_types_used(agents)
    if used:
        print(f"plugin types used: {', '.join(used)}")
    return 0


def test_output(args: argparse.Namespace) -> int:
    """Exit 0 when every kafka sink checked out, 1 when one did not, 2 for a bad file."""
    from logflume.sink_check import check_sink
    from logflume.table import print_json
    from sinks.kafka.config import KafkaSinkConfig

    variables = _env_file(args.env_file)
    if variables is None:
        return 2
    agents, errors = _compile(args.config, {**os.environ, **variables})
    if errors:
        print(f"{len(errors)} error(s) in {args.config}", file=sys.stderr)
        return 2
    if args.name is not None:
        if args.name not in agents:
            print(
                f"no agent {args.name!r} in {args.config}; agents: {', '.join(agents)}",
                file=sys.stderr,
            )
            return 2
        agents = {args.name: agents[args.name]}
    results = []
    with_agent = len(agents) > 1
    for agent, spec in agents.items():
        for sink, sink_spec in spec.sinks.items():
            if not isinstance(sink_spec.config, KafkaSinkConfig):
                if args.output_format == "text":
                    label = f"{agent}.{sink}" if with_agent else sink
                    print(f"sink {label}: not checked (type {sink_spec.cls.type_name})")
                continue
            result = check_sink(agent, sink, sink_spec.config, args.timeout)
            results.append(result)
            if args.output_format == "text":
                print(result.line(with_agent), flush=True)
    if args.output_format == "json":
        print_json([r.as_json() for r in results])
    elif not results:
        print(f"no kafka sinks in {args.config}")
    return 0 if all(r.ok for r in results) else 1


def top(args: argparse.Namespace) -> int:
    from logflume.agent_top import run as run_top

    url = agent_url(args)
    if url is None:
        return 1
    if args.interval <= 0:
        print("--interval: must be above 0", file=sys.stderr)
        return 1
    return run_top(f"{url}/metrics", args.interval, args.once, args.output_format)


def tap(args: argparse.Namespace) -> int:
    from logflume.agent_tap import run as run_tap

    url = agent_url(args)
    if url is None:
        return 1
    if args.limit < 1:
        print("--limit: must be at least 1", file=sys.stderr)
        return 1
    return run_tap(url, args.component, args.limit, args.format)


def reference(args: argparse.Namespace) -> int:
    """CONFIGURATION.md and pipelines.schema.json are this command's output."""
    from agent.plugins import failed_plugins
    from agent.reference import MissingPlugins, render

    try:
        text = render(args.format, plugins=not args.builtin_only)
    except MissingPlugins as exc:
        print(f"cannot make the reference: {exc}", file=sys.stderr)
        if failed_plugins() and not args.builtin_only:
            print("(--builtin-only makes it without the plugins)", file=sys.stderr)
        return 1
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def plugins(args: argparse.Namespace) -> int:
    """Every registered type, with its kind and origin; failures on stderr."""
    import logflume
    from agent.api import KINDS, REGISTRY
    from agent.plugins import load_plugins, origin
    from logflume.table import Table

    failures = load_plugins()
    table = Table(["KIND", "TYPE", "ALIAS-OF", "ORIGIN", "VERSION", "ENTRY-POINT", "MODULE"])
    for (kind, name), cls in sorted(REGISTRY.items(), key=lambda r: (KINDS.index(r[0][0]), r[0])):
        where = origin(kind, name)
        cells: tuple[str | None, str | None, str | None]  # origin, version, entry point
        if where is None:  # registered by no plugin package and no entry point
            cells = ("unknown", None, None)
        elif where.builtin:
            cells = ("built-in", logflume.__version__, None)
        else:
            cells = (where.distribution, where.version, where.entry_point)
        alias_of = cls.type_name if name != cls.type_name else None
        table.add(kind, name, alias_of, *cells, cls.__module__)
    table.print(args.output_format)
    for what, error in sorted(failures.items()):
        print(f"failed to load: {what}: {error}", file=sys.stderr)
    return 1 if failures else 0


def run(args: argparse.Namespace) -> int:
    import uvloop

    from agent.plugins import failed_plugins
    from agent.runtime import AgentRuntime, tune_gc

    variables = _env_file(args.env_file)
    if variables is None:
        return 1
    # Into the process's environment, as systemd's EnvironmentFile= puts them: the
    # host name of headers and transactional ids and each reload (SIGHUP) read it.
    os.environ.update(variables)
    for what, error in sorted(failed_plugins().items()):  # loads them: before the errors
        logging.getLogger("agent").warning("%s failed to load: %s", what, error)
    agents, errors = _compile(args.config)
    if errors:
        return 1
    name = args.name
    if name is None and len(agents) == 1:
        name = next(iter(agents))
    if name not in agents:
        print(f"no agent {name!r} in {args.config}; agents: {', '.join(agents)}", file=sys.stderr)
        return 1
    if args.state_dir:
        state_dir = Path(args.state_dir).absolute()
    else:
        state_dir = default_state_dir(name, os.geteuid(), os.environ, Path.home())
    logging.getLogger("agent").info("agent %s: state in %s", name, state_dir)
    tune_gc()
    uvloop.run(AgentRuntime(agents[name], state_dir, args.config).run())
    return 0
