import subprocess
import sys


def test_help_lists_subcommands():
    out = subprocess.run(
        [sys.executable, "-m", "logflume", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "usage: logflume" in out
