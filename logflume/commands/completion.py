"""`logflume completion bash`: print a tab-completion script for bash.

The script is generated (by shtab) from the same argparse definitions the command
parses with, so it knows every subcommand, flag and choice of this version.
`deploy/install-agent.sh` installs it; by hand:

    logflume completion bash > /usr/local/share/bash-completion/completions/logflume

Only bash is offered: it is what the tests drive (tests/logflume/test_completion.py).
"""

import argparse

SHELLS = ("bash",)

# Options whose value is a path: they complete file or directory names.
FILE_OPTIONS = {"config", "command_config", "env_file", "output"}
DIRECTORY_OPTIONS = {"data_dir", "state_dir", "checkpoint"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print a tab-completion script for SHELL on stdout.",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=run)


def mark_paths(parser: argparse.ArgumentParser) -> None:
    """Tell shtab which options take a file or a directory (KEY=VALUE ones excepted)."""
    import shtab

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                mark_paths(sub)
        elif action.metavar not in ("KEY=VALUE",):
            # shtab's documented way: an attribute it reads on argparse's actions
            if action.dest in FILE_OPTIONS:
                action.complete = shtab.FILE  # type: ignore[attr-defined]
            elif action.dest in DIRECTORY_OPTIONS:
                action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]


def run(args) -> int:
    import shtab

    from logflume.cli import build_parser

    parser = build_parser()
    mark_paths(parser)
    print(shtab.complete(parser, shell=args.shell), end="")
    return 0
