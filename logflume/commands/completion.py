"""`logflume completion bash|zsh`: print a tab-completion script for bash or zsh.

The script is generated (by shtab) from the same argparse definitions the command
parses with, so it knows every subcommand, flag and choice of this version, and
which options take a file or a directory. `deploy/install-agent.sh` and the .deb
install both; by hand:

    logflume completion bash > /usr/local/share/bash-completion/completions/logflume
    logflume completion zsh > /usr/local/share/zsh/site-functions/_logflume

(zsh reads `_logflume` from a directory on its `fpath` once `compinit` has run;
Debian's zsh has /usr/local/share/zsh/site-functions there, and the .deb's place is
/usr/share/zsh/vendor-completions.) bash and zsh are what the tests drive, each in
the real shell (tests/logflume/test_completion.py and test_completion_zsh.py).
"""

import argparse
from collections.abc import Iterator

SHELLS = ("bash", "zsh")

# Options whose value is a path: they complete file or directory names.
FILE_OPTIONS = {
    "config",
    "command_config",
    "env_file",
    "output",
    "topics_to_move_json_file",
    "reassignment_json_file",
}
DIRECTORY_OPTIONS = {"data_dir", "state_dir", "checkpoint"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print a tab-completion script for SHELL on stdout.",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=run)


def arguments(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """Every argument of the parser and of its subcommands, each once (argparse may
    share an action between parsers, and aliases name one subparser twice)."""
    seen: set[int] = set()

    def walk(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
        for action in parser._actions:
            if id(action) in seen:
                continue
            seen.add(id(action))
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from walk(sub)
            else:
                yield action

    return walk(parser)


def mark_paths(parser: argparse.ArgumentParser) -> None:
    """Tell shtab which options take a file or a directory (KEY=VALUE ones excepted)."""
    import shtab

    for action in arguments(parser):
        if action.metavar not in ("KEY=VALUE",):
            # shtab's documented way: an attribute it reads on argparse's actions
            if action.dest in FILE_OPTIONS:
                action.complete = shtab.FILE  # type: ignore[attr-defined]
            elif action.dest in DIRECTORY_OPTIONS:
                action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]


def quote_zsh_metavars(parser: argparse.ArgumentParser) -> None:
    """Backslash the colons of the options' metavars (HOST:PORT) for zsh.

    shtab writes an option's metavar unquoted as the message of its zsh spec,
    `--opt[help]:METAVAR:action`: a colon in it would end the message early and zsh
    would run the rest as the action (`command not found: PORT` on `--bootstrap-server
    <TAB>`). _arguments reads `\\:` as a colon of the message. Only for the parser
    the script is generated from: --help shows the metavars as they are.
    """
    for action in arguments(parser):
        if action.option_strings and isinstance(action.metavar, str):
            action.metavar = action.metavar.replace(":", "\\:")


def run(args) -> int:
    import shtab

    from logflume.cli import build_parser

    parser = build_parser()
    mark_paths(parser)
    if args.shell == "zsh":
        quote_zsh_metavars(parser)
    print(shtab.complete(parser, shell=args.shell), end="")
    return 0
