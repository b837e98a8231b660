"""`logflume completion bash`, driven in a real bash as its completion would be
(zsh's: test_completion_zsh.py)."""

import subprocess
import sys

import pytest

DRIVER = r"""
source "$1"
shift
COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
read -r -a COMP_WORDS <<<"$COMP_LINE"
[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMPREPLY=()
"$(complete -p logflume | awk '{print $(NF-1)}')" logflume "${COMP_WORDS[COMP_CWORD]}" \
  "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    out = subprocess.run(
        [sys.executable, "-m", "logflume", "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = tmp_path_factory.mktemp("completion") / "logflume"
    path.write_text(out)
    return path


def complete(script, line: str) -> list[str]:
    """What bash offers after `line` (the function `complete -p logflume` names)."""
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", DRIVER, "driver", str(script), line],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    return [w for w in result.stdout.splitlines() if w]


def test_subcommands_and_their_actions(script):
    assert complete(script, "logflume to") == ["topics"]
    assert {"agent", "broker", "topics", "groups", "completion", "manpage"} <= set(
        complete(script, "logflume ")
    )
    assert complete(script, "logflume agent ") == [
        "run",
        "validate",
        "test-output",
        "top",
        "tap",
        "reference",
        "plugins",
    ]
    assert complete(script, "logflume completion ") == ["bash", "zsh"]


def test_flags_and_their_choices(script):
    assert complete(script, "logflume topics --boo") == ["--bootstrap-server"]
    assert complete(script, "logflume groups --to-e") == ["--to-earliest"]
    assert complete(script, "logflume --log-level ") == [
        "DEBUG",
        "INFO",
        "WARNING",
        "ERROR",
        "CRITICAL",
    ]
    assert complete(script, "logflume --log-format ") == ["text", "json"]
    assert complete(script, "logflume produce --compression z") == ["zstd"]
    assert complete(script, "logflume agent tap --format ") == ["json", "text"]


def test_paths_complete_as_files_or_directories(script, tmp_path):
    (tmp_path / "pipelines.yaml").write_text("")
    (tmp_path / "pipes.d").mkdir()
    assert sorted(complete(script, f"logflume agent run --config {tmp_path}/pip")) == [
        f"{tmp_path}/pipelines.yaml",
        f"{tmp_path}/pipes.d",
    ]
    assert sorted(complete(script, f"logflume agent validate --env-file {tmp_path}/pip")) == [
        f"{tmp_path}/pipelines.yaml",
        f"{tmp_path}/pipes.d",
    ]
    for action in ("test-output", "top", "tap"):
        assert sorted(complete(script, f"logflume agent {action} --config {tmp_path}/pip")) == [
            f"{tmp_path}/pipelines.yaml",
            f"{tmp_path}/pipes.d",
        ]
    assert complete(script, f"logflume agent run --state-dir {tmp_path}/pip") == [
        f"{tmp_path}/pipes.d"
    ]
