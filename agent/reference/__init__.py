"""The reference of pipelines.yaml, generated from the code that reads the file.

Why generated: the keys a component accepts are the fields of its `Config`
dataclass (agent/schema.py turns YAML into it), so a reference written by hand
drifts from them with every new key. This package reads the registry instead
(model.py). For each type it takes every key, its YAML type and its default from
the dataclass fields, and its meaning from the trailing `# comment` on the field's
line: the one place where a developer documents a key, next to its declaration.
The agent's own settings (`AgentSettings`) and the wiring keys every component of
a kind takes (`WIRING`) are read the same way.

Two renderers share that model: markdown.py for CONFIGURATION.md, and
json_schema.py for pipelines.schema.json, with which editors complete and check
the file. `logflume agent reference` writes either (`render`);
tests/agent/test_reference.py fails when a key has no comment or when the
checked-in files differ from what this package produces.

The types of the plugin packages (agent.plugins.PLUGIN_PACKAGES) are in the
reference, and, with `plugins=True`, those of the installed third-party plugins
(entry points, agent/plugins.py), each with its distribution: what `logflume agent
reference` writes unless `--builtin-only`. The checked-in files hold the built-in
types alone, so that they do not depend on what is installed where they are made.
Types registered by other code loaded in the same process, such as the test
plugins, are never in it.
"""

from __future__ import annotations

import json

from agent.reference import json_schema, markdown
from agent.reference.model import MissingPlugins

FORMATS = ("markdown", "json-schema")

__all__ = ["FORMATS", "MissingPlugins", "render"]


def render(fmt: str, plugins: bool = False) -> str:
    """The text of the reference in `fmt` (one of FORMATS), as the files hold it;
    with `plugins`, the installed plugins' types too."""
    if fmt == "markdown":
        return markdown.markdown(plugins)
    if fmt == "json-schema":
        schema = json_schema.json_schema(plugins)
        return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    raise ValueError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
