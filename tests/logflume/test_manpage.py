"""`logflume manpage`: a roff page that groff reads without a warning and that
documents every subcommand and flag the parser has."""

import argparse
import os
import subprocess
import sys

import pytest

from logflume.cli import build_parser


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = subprocess.run(
        [sys.executable, "-m", "logflume", "manpage"], capture_output=True, text=True, check=True
    ).stdout
    path = tmp_path_factory.mktemp("man") / "logflume.1"
    path.write_text(out)
    return path


def commands(parser, path=("logflume",)):
    """(command path, its own arguments) for the parser and every subparser under it."""
    own = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            own.append(action)
    yield " ".join(path), own


def sections(rendered: str) -> dict[str, str]:
    """The rendered page cut at its `COMMAND 'logflume ...'` headings, whitespace
    folded; "logflume" is the whole page."""
    folded = {"logflume": " ".join(rendered.split())}
    for chunk in rendered.split("\nCOMMAND '")[1:]:
        name, _, body = chunk.partition("'")
        folded[name] = " ".join(body.split())
    return folded


def test_groff_reads_it_without_warnings(page):
    result = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_man_shows_every_command_with_its_flags_and_their_help(page):
    rendered = subprocess.run(
        ["man", "-l", str(page)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MANWIDTH": "200", "MANPAGER": "cat"},
    ).stdout
    assert "logflume - log pipeline" in rendered
    assert "/etc/logflume/pipelines.yaml" in rendered
    found = sections(rendered)
    expected = list(commands(build_parser()))
    assert len(expected) > 10
    for command, actions in expected:
        assert command in found, command
        for action in actions:
            for flag in action.option_strings:
                assert flag in found[command], (command, flag)
            assert " ".join(action.help.split()) in found[command], (command, action.help)


def test_a_help_line_starting_with_an_apostrophe_stays_text(tmp_path):
    """groff reads a line starting with ' as a control line: quoted, it is text."""
    from logflume.commands.manpage import quote_text_lines

    page = tmp_path / "x.1"
    page.write_text(quote_text_lines(".TH X 1\n.SH NAME\nx\n'quoted' names are shown\n"))
    out = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", str(page)], capture_output=True, text=True
    )
    assert out.stderr == ""
    assert "'quoted' names are shown" in out.stdout.replace("\u2019", "'")
