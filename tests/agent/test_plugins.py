"""Third-party plugins (agent/plugins.py): distributions with entry points in the group
`logflume.plugins`, written as pip installs them (a package beside its
NAME-VERSION.dist-info with METADATA and entry_points.txt) into a directory on the
PYTHONPATH of a `logflume` process. The plugin of CONFIGURATION.md's "Plugins"
section is the one installed, as written there: its pyproject.toml's entry points
and its module."""

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from agent.api import REGISTRY, DuplicateType, Interceptor, register
from testkit.agent import AgentProcess, read_topic
from testkit.procs import wait_until

ROOT = Path(__file__).resolve().parents[2]
GROUP = "logflume.plugins"


def documented_plugin() -> tuple[dict[str, str], dict[str, str]]:
    """({path: text}, {entry point: value}) of the plugin CONFIGURATION.md shows."""
    text = (ROOT / "CONFIGURATION.md").read_text()
    section = text.split("\n## Plugins\n", 1)[1].split("\n## ", 1)[0]
    toml = re.search(r"```toml\n(.*?)```", section, re.S)
    python = re.search(r"```python\n# (\S+)\n(.*?)```", section, re.S)
    assert toml and python, "CONFIGURATION.md's Plugins section lost its examples"
    project = tomllib.loads(toml.group(1))["project"]
    assert (project["name"], project["version"]) == ("site-plugins", "1.0")
    return {python.group(1): python.group(2)}, project["entry-points"][GROUP]


def install(root: Path, name: str, version: str, entry_points: dict, files: dict) -> None:
    """A distribution as pip leaves it in site-packages: its files, each package with an
    __init__.py, and NAME-VERSION.dist-info with METADATA and entry_points.txt."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    points = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{points}")


def install_documented(root: Path) -> None:
    files, entry_points = documented_plugin()
    install(root, "site-plugins", "1.0", entry_points, files)


def with_path(root: Path) -> dict[str, str]:
    """The environment, with `root` first on the PYTHONPATH."""
    paths = [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def logflume(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logflume", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=with_path(root),
        timeout=120,
    )


def types(root: Path) -> tuple[dict[tuple[str, str], dict], subprocess.CompletedProcess]:
    """{(kind, type): row} of `logflume agent plugins --output json`, and the run."""
    done = logflume(root, "agent", "plugins", "--output", "json")
    return {(r["kind"], r["type"]): r for r in json.loads(done.stdout)}, done


# A class the documented plugin's type keeps to: interceptors that do nothing, to be
# registered under names a built-in or another plugin has.
NOOP = """
import dataclasses

from agent.api import Interceptor, register


@register("interceptor", "shout")
class Shout(Interceptor):
    @dataclasses.dataclass
    class Config:
        pass

    def intercept(self, events):
        return events


@register("interceptor", "{name}")
class Clash(Shout):
    pass
"""

PIPELINE = """
agents:
  a:
    sources:
      in:
        type: udp
        listen: 127.0.0.1:0
        channels: [c]
        interceptors: [{{type: {interceptor}}}]
    channels:
      c: {{type: memory}}
    sinks:
      out: {{type: console, channel: c}}
"""


# ---------------------------------------------------------------- discovery


def test_a_plugins_types_are_found_and_listed_with_their_distribution(tmp_path):
    install_documented(tmp_path)
    found, done = types(tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert found[("interceptor", "upper")] == {
        "kind": "interceptor",
        "type": "upper",
        "alias_of": None,
        "origin": "site-plugins",
        "version": "1.0",
        "entry_point": "upper",
        "module": "site_plugins.upper",
    }
    json_row = found[("interceptor", "json")]
    assert (json_row["origin"], json_row["entry_point"]) == ("built-in", None)
    assert json_row["module"] == "agent.interceptors.jsonparse"
    assert found[("sink", "broker")]["alias_of"] == "kafka"
    text = logflume(tmp_path, "agent", "plugins")
    assert text.returncode == 0, text.stderr
    header, *rows = [line.split() for line in text.stdout.splitlines()]
    assert header == ["KIND", "TYPE", "ALIAS-OF", "ORIGIN", "VERSION", "ENTRY-POINT", "MODULE"]
    upper = ["interceptor", "upper", "-", "site-plugins", "1.0", "upper", "site_plugins.upper"]
    assert upper in rows
    assert len(rows) == len(found)


def test_validate_accepts_a_pipeline_using_a_plugin_type_and_names_it(tmp_path):
    install_documented(tmp_path / "site")
    config = tmp_path / "pipelines.yaml"
    config.write_text(PIPELINE.format(interceptor="upper"))
    done = logflume(tmp_path / "site", "agent", "validate", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "OK: agents a",
        "plugin types used: interceptor upper (site-plugins 1.0)",
    ]
    assert done.stderr == ""
    # without the plugin on the path the type is unknown, and nothing failed to load
    alone = logflume(tmp_path / "nothing", "agent", "validate", "--config", str(config))
    assert alone.returncode == 1
    assert "unknown interceptor type 'upper'; known: add_fields," in alone.stderr
    assert "failed to load" not in alone.stderr


def test_reference_adds_installed_plugin_types_but_the_checked_in_files_have_none(tmp_path):
    install_documented(tmp_path / "site")
    site = tmp_path / "site"
    markdown = logflume(site, "agent", "reference")
    assert markdown.returncode == 0, markdown.stderr
    assert "### Interceptor `upper`\n\nUpper-cases each event's line.\n\n" in markdown.stdout
    assert (
        "Plugin: site-plugins 1.0, entry point `upper = site_plugins.upper`; "
        "code: `site_plugins/upper.py`." in markdown.stdout
    )
    schema = json.loads(logflume(site, "agent", "reference", "--format", "json-schema").stdout)
    assert "upper" in schema["$defs"]["interceptor"]["properties"]["type"]["anyOf"][0]["enum"]
    assert schema["$defs"]["interceptor.upper"]["description"] == (
        "Upper-cases each event's line. (site-plugins 1.0)"
    )
    for fmt, name in (("markdown", "CONFIGURATION.md"), ("json-schema", "pipelines.schema.json")):
        done = logflume(site, "agent", "reference", "--builtin-only", "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert done.stdout == (ROOT / name).read_text(), name
        assert "site-plugins 1.0" not in done.stdout


# ---------------------------------------------------------------- taken names


def test_a_plugin_cannot_replace_a_built_in_type(tmp_path):
    install_documented(tmp_path)
    clash = {"clash_plugins/clash.py": NOOP.replace("{name}", "json")}
    install(tmp_path, "clash-plugins", "2.0", {"clash": "clash_plugins.clash"}, clash)
    found, done = types(tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        "failed to load: plugin clash-plugins 2.0 (entry point clash = clash_plugins.clash): "
        "interceptor type 'json' of clash_plugins.clash.Clash is refused: the name is taken "
        "by the built-in agent.interceptors.jsonparse.JsonParser, and a plugin cannot "
        "replace a type; give the plugin's type another name\n"
    )
    assert found[("interceptor", "json")]["origin"] == "built-in"
    assert ("interceptor", "shout") not in found  # registered before the refusal: taken back
    assert found[("interceptor", "upper")]["origin"] == "site-plugins"  # the others load


def test_between_two_plugins_the_first_by_distribution_name_keeps_the_type(tmp_path):
    install_documented(tmp_path)
    first = {"a_plugins/upper.py": NOOP.replace("shout", "a-shout").replace("{name}", "upper")}
    install(tmp_path, "a-plugins", "0.1", {"upper": "a_plugins.upper:Clash"}, first)
    found, done = types(tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        "failed to load: plugin site-plugins 1.0 (entry point upper = site_plugins.upper): "
        "interceptor type 'upper' of site_plugins.upper.Upper is refused: the name is taken "
        "by a_plugins.upper.Clash of plugin a-plugins 0.1 (entry point upper = "
        "a_plugins.upper:Clash), and a plugin cannot replace a type; give the plugin's type "
        "another name\n"
    )
    assert found[("interceptor", "upper")]["origin"] == "a-plugins"
    assert found[("interceptor", "a-shout")]["module"] == "a_plugins.upper"


def test_register_refuses_a_taken_name_and_registers_none_of_the_class(tmp_path):
    @register("interceptor", "test-plugins-first")
    class First(Interceptor):
        @dataclasses.dataclass
        class Config:
            pass

        def intercept(self, events):
            return events

    try:
        with pytest.raises(DuplicateType) as refused:

            @register("interceptor", "test-plugins-second", aliases=("test-plugins-first",))
            class Second(First):
                pass

        assert refused.value.existing is First and refused.value.new.__name__ == "Second"
        assert str(refused.value) == (
            "interceptor type 'test-plugins-first' registered twice: by "
            f"{__name__}.{First.__qualname__} and by {__name__}.{refused.value.new.__qualname__}"
        )
        assert ("interceptor", "test-plugins-second") not in REGISTRY
        assert REGISTRY[("interceptor", "test-plugins-first")] is First
    finally:
        REGISTRY.pop(("interceptor", "test-plugins-first"), None)


# ---------------------------------------------------------------- failures


def install_broken(root: Path) -> None:
    """broken-plugins 0.3: registers `half`, then fails to import a module; and an
    entry point of another distribution naming an object the documented module lacks
    (loaded before site-plugins: its failure must not take site-plugins' type away)."""
    install_documented(root)
    broken = NOOP.replace("shout", "half").replace("{name}", "half-2") + "\nimport absent_xyz\n"
    files = {"broken_plugins/broken.py": broken}
    install(root, "broken-plugins", "0.3", {"broken": "broken_plugins.broken"}, files)
    install(root, "aaa-extra", "1.0", {"nope": "site_plugins.upper:Nope"}, {})


# (what failed, its error), in the order they are reported
FAILED = [
    (
        "plugin aaa-extra 1.0 (entry point nope = site_plugins.upper:Nope)",
        "AttributeError: module 'site_plugins.upper' has no attribute 'Nope'",
    ),
    (
        "plugin broken-plugins 0.3 (entry point broken = broken_plugins.broken)",
        "ModuleNotFoundError: No module named 'absent_xyz'",
    ),
]


def test_a_plugin_that_fails_to_load_is_named_and_the_others_load(tmp_path):
    install_broken(tmp_path)
    found, done = types(tmp_path)
    assert done.returncode == 1
    assert done.stderr == "".join(f"failed to load: {what}: {error}\n" for what, error in FAILED)
    assert ("interceptor", "half") not in found and ("interceptor", "half-2") not in found
    assert found[("interceptor", "upper")]["origin"] == "site-plugins"


def test_validate_names_the_plugin_that_failed_when_its_type_is_asked_for(tmp_path):
    install_broken(tmp_path / "site")
    config = tmp_path / "pipelines.yaml"
    config.write_text(PIPELINE.format(interceptor="half"))
    done = logflume(tmp_path / "site", "agent", "validate", "--config", str(config))
    assert done.returncode == 1
    errors = done.stderr.splitlines()
    warnings = [f"warning: {what} failed to load: {error}" for what, error in FAILED]
    assert errors[:2] == warnings
    error = next(e for e in errors if "agents.a.sources.in.interceptors[0].type" in e)
    assert error.startswith(f"{config}:")
    assert "unknown interceptor type 'half'; known: add_fields," in error
    assert error.endswith("; failed to load: " + "; ".join(f"{w}: {e}" for w, e in FAILED))
    # a pipeline that needs none of them passes, with the warnings
    config.write_text(PIPELINE.format(interceptor="upper"))
    done = logflume(tmp_path / "site", "agent", "validate", "--config", str(config))
    assert done.returncode == 0
    assert done.stdout.splitlines()[0] == "OK: agents a"
    assert done.stderr.splitlines() == warnings


# ---------------------------------------------------------------- an agent


def test_an_agent_runs_a_plugins_interceptor(tmp_path, broker, monkeypatch):
    install_documented(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", with_path(tmp_path / "site")["PYTHONPATH"])
    log = tmp_path / "app.log"
    log.write_text("hello world\nsecond Line\n")
    text = f"""
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      app:
        type: tail
        paths: ["{log}"]
        start_at: beginning
        channels: [c]
        interceptors: [{{type: upper}}]
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: kafka, channel: c, topic: shouted, bootstrap_servers: "{broker.bootstrap}",
          linger_ms: 2}}
"""
    agent = AgentProcess(tmp_path, text).start()
    try:
        wait_until(
            lambda: agent.metric("logflume_agent_sink_events_out_total", component="k") == 2,
            60,
            "2 lines delivered",
        )
        shipped = read_topic(broker.bootstrap, "shouted", lambda msgs: len(msgs) >= 2, 60)
    finally:
        agent.stop()
    assert [m.value() for m in shipped] == [b"HELLO WORLD", b"SECOND LINE"]
