import pytest


@pytest.fixture(scope="session", autouse=True)
def no_pythonpath():
    """These tests install logflume and run what got installed: a PYTHONPATH naming
    this tree would hand the tree's code to the installed programs instead. The tree's
    own code runs with the tree as working directory (`python -m logflume` finds it
    there)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONPATH", raising=False)
        yield
