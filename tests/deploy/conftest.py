import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def no_pythonpath():
    """These tests install logflume and run what got installed: a PYTHONPATH naming
    this tree would hand the tree's code to the installed programs instead. The tree's
    own code runs with the tree as working directory (`python -m logflume` finds it
    there)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONPATH", raising=False)
        yield


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this tree, built offline (`pip wheel --no-deps --no-build-isolation`)."""
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    result = subprocess.run(
        [*cmd, "-w", str(out), str(REPO)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = out.glob("logflume-*.whl")
    return path
