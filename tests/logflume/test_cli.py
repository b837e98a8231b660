import argparse
import re
import subprocess
import sys

from logflume.cli import build_parser


def registered_subcommands() -> list[str]:
    """The subcommand names the CLI registers (every module in logflume/commands adds
    its own), read from the parser `logflume` builds."""
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


def test_help_lists_subcommands():
    out = subprocess.run(
        [sys.executable, "-m", "logflume", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("usage: logflume")
    names = registered_subcommands()
    assert len(names) >= 2
    # argparse lists a subcommand (indented, under COMMAND) only when it has a help text
    listed = re.findall(r"^    (\S+)", out, re.MULTILINE)
    assert listed == names
