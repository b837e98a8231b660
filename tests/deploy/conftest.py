from pathlib import Path

import pytest

from tests.deploy.debs import build_deb


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
def deb(wheel, tmp_path_factory) -> Path:
    """The agent's .deb of this tree, built once: one test worker runs the whole of
    tests/deploy (tests/conftest.py), test_deb.py and test_deb_upgrade.py use it."""
    return build_deb(wheel, tmp_path_factory.mktemp("deb"))
