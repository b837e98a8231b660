"""`logflume agent run|validate`: run one agent of pipelines.yaml, or check the file."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("agent", help="run or validate log agents (pipelines.yaml)")
    sub = parser.add_subparsers(dest="agent_command", metavar="ACTION", required=True)
    run_p = sub.add_parser("run", help="run one agent until SIGTERM (SIGHUP reloads the file)")
    run_p.add_argument("--config", default="pipelines.yaml", help="pipelines file")
    run_p.add_argument("--name", help="agent to run (may be omitted if the file has one)")
    run_p.add_argument("--state-dir", help="positions, WAL... (default ./data/agent/<name>)")
    run_p.set_defaults(func=run)
    val_p = sub.add_parser("validate", help="check a pipelines file; print every error")
    val_p.add_argument("--config", default="pipelines.yaml", help="pipelines file")
    val_p.set_defaults(func=validate)


def _compile(path: str):
    from agent.config import compile_file

    agents, errors = compile_file(path)
    for error in errors:
        print(error, file=sys.stderr)
    return agents, errors


def validate(args: argparse.Namespace) -> int:
    agents, errors = _compile(args.config)
    if errors:
        print(f"{len(errors)} error(s) in {args.config}", file=sys.stderr)
        return 1
    print(f"OK: agents {', '.join(agents)}")
    return 0


def run(args: argparse.Namespace) -> int:
    import uvloop

    from agent.runtime import AgentRuntime

    agents, errors = _compile(args.config)
    if errors:
        return 1
    name = args.name
    if name is None and len(agents) == 1:
        name = next(iter(agents))
    if name not in agents:
        print(f"no agent {name!r} in {args.config}; agents: {', '.join(agents)}", file=sys.stderr)
        return 1
    state_dir = args.state_dir or f"./data/agent/{name}"
    uvloop.run(AgentRuntime(agents[name], state_dir, args.config).run())
    return 0
