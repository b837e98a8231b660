"""ARCHITECTURE.md stays true to the tree: every package and subpackage of the
project, every request-handler module and every module path it names exist, and
every package and handler module is in it."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = (REPO / "ARCHITECTURE.md").read_text()
TOP_LEVEL = ("common", "agent", "sources", "sinks", "broker", "spark_etl", "console", "logflume")


def packages() -> list[str]:
    """Every package directory (one with an __init__.py) under the top-level ones."""
    out = []
    for top in TOP_LEVEL:
        for init in sorted((REPO / top).rglob("__init__.py")):
            out.append(init.parent.relative_to(REPO).as_posix())
    return out


def test_every_package_is_in_the_document():
    missing = [p for p in packages() if not re.search(rf"(?<![\w/]){re.escape(p)}(?!\w)", DOC)]
    assert missing == [], f"ARCHITECTURE.md does not name: {missing}"


def test_every_request_handler_module_is_in_the_document():
    handlers = sorted((REPO / "broker/server/handlers").glob("*.py"))
    missing = [h.name for h in handlers if h.name != "__init__.py" and f"`{h.name}`" not in DOC]
    assert missing == [], f"ARCHITECTURE.md's handler table lacks: {missing}"


def test_every_path_the_document_names_exists():
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]*(?:\.py|\.md|\.sh|\.yaml)?)`", DOC))
    gone = sorted(p for p in named if not (REPO / p).exists())
    assert gone == [], f"ARCHITECTURE.md names paths that do not exist: {gone}"
