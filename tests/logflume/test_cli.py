import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_every_subcommand_and_argument_has_a_help_text():
    """--help, the man page and the completion descriptions all come from these texts."""
    missing = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {choice.dest: choice.help for choice in action._choices_actions}
                for name, sub in action.choices.items():
                    if not helps.get(name):
                        missing.append(f"{path} {name}")
                    walk(sub, f"{path} {name}")
            elif not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "logflume")
    assert missing == []


def test_log_level_is_checked_and_case_blind():
    parser = build_parser()
    assert parser.parse_args(["--log-level", "debug", "agent", "validate"]).log_level == "DEBUG"
    bad = subprocess.run(
        [sys.executable, "-m", "logflume", "--log-level", "verbose", "agent", "validate"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert "invalid choice: 'VERBOSE'" in bad.stderr


def test_log_format_is_text_or_json(capsys):
    parser = build_parser()
    assert parser.parse_args(["agent", "validate"]).log_format == "text"
    assert parser.parse_args(["--log-format", "json", "agent", "validate"]).log_format == "json"
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-format", "yaml", "agent", "validate"])
    assert "invalid choice: 'yaml'" in capsys.readouterr().err


def test_the_agent_state_dir_default_is_absolute_and_independent_of_the_cwd(tmp_path):
    from logflume.commands.agent import default_state_dir

    home = tmp_path / "home"
    assert default_state_dir("web", 0, {}, home) == Path("/var/lib/logflume/agent-web")
    user = default_state_dir("web", 1000, {}, home)
    assert user == home / ".local" / "state" / "logflume" / "agent-web"
    xdg = default_state_dir("web", 1000, {"XDG_STATE_HOME": "/srv/state"}, home)
    assert xdg == Path("/srv/state/logflume/agent-web")
    assert all(p.is_absolute() for p in (user, xdg))


def test_agent_run_says_where_its_state_is(tmp_path):
    """The state dir is printed at start (here given relative: it is made absolute)."""
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        "agents:\n  solo:\n    sources:\n      u: {type: udp, listen: '127.0.0.1:0', "
        "channels: [c]}\n    channels:\n      c: {type: memory}\n    sinks:\n"
        "      out: {type: console, channel: c}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "logflume", "agent", "run", "--config", str(config),
         "--state-dir", "relative-state"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        line = proc.stderr.readline()
        while line and "state in" not in line:
            line = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(30)
    assert f"agent solo: state in {tmp_path / 'relative-state'}" in line


def test_the_transactions_help_names_every_subcommand():
    """`logflume --help` lists what `logflume transactions` does: each of its
    subcommands, not just the first two."""
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    (help_text,) = [c.help for c in sub._choices_actions if c.dest == "transactions"]
    (subcommand,) = [a for a in sub.choices["transactions"]._actions if a.dest == "subcommand"]
    assert subcommand.choices == ("list", "describe", "describe-producers", "find-hanging", "abort")
    assert all(name in help_text for name in subcommand.choices)
