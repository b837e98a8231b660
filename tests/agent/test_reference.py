"""The configuration reference (agent/reference/): every key documented, the
checked-in CONFIGURATION.md and pipelines.schema.json current, and a schema that
accepts the repository's pipelines.yaml and rejects what the compiler rejects."""

import copy
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

import tests.agent.fakes  # noqa: F401 - registers test-* types, which the reference leaves out
from agent import reference
from agent.api import REGISTRY
from agent.config import WIRING_KEYS, compile_text
from agent.plugins import PLUGIN_PACKAGES
from agent.reference import json_schema, markdown, model
from agent.schema import Errors, convert, parse_duration, parse_size

ROOT = Path(__file__).resolve().parents[2]
FILES = {"markdown": "CONFIGURATION.md", "json-schema": "pipelines.schema.json"}


def undocumented(keys, where: str) -> list[str]:
    """Dotted names of the keys (nested ones included) that have no meaning."""
    missing = []
    for key in keys:
        if not key.meaning:
            missing.append(f"{where}.{key.name}")
        missing += undocumented(key.keys, f"{where}.{key.name}")
    return missing


def every_key():
    """(where, key) for every key of the reference, nested ones included."""

    def walk(keys, where):
        for key in keys:
            yield f"{where}.{key.name}", key
            yield from walk(key.keys, f"{where}.{key.name}")

    yield from walk(model.agent_keys(), "agent")
    for kind in model.WIRING:
        yield from walk(model.wiring_keys(kind), f"{kind} wiring")
    for t in model.component_types():
        yield from walk(t.keys, f"{t.kind} {t.name}")


def shipped(cls) -> bool:
    return cls.__module__.startswith(tuple(f"{p}." for p in PLUGIN_PACKAGES))


# ---------------------------------------------------------------- (a) meanings


def test_every_key_of_every_type_has_a_meaning():
    types = {(t.kind, t.name): t for t in model.component_types()}  # loads the plugins
    missing = []
    for (kind, name), cls in sorted(REGISTRY.items()):
        if not shipped(cls):
            continue
        t = types[(kind, cls.type_name)]
        assert [k.name for k in t.keys] == [f.name for f in dataclasses.fields(cls.Config)]
        missing += undocumented(t.keys, f"{kind} {name}")
    missing += undocumented(model.agent_keys(), "agent")
    for kind in model.WIRING:
        missing += undocumented(model.wiring_keys(kind), f"{kind} wiring")
    assert not missing, (
        "keys without a meaning (write it as a `# comment` at the end of the field's line): "
        + ", ".join(missing)
    )


def test_the_reference_has_every_shipped_type_and_no_other():
    found = model.component_types()
    names = {(t.kind, n) for t in found for n in (t.name, *t.aliases)}
    assert names == {key for key, cls in REGISTRY.items() if shipped(cls)}
    assert ("sink", "broker") in names  # an alias
    assert not any(t.name.startswith("test-") for t in found)
    kafka = next(t for t in found if (t.kind, t.name) == ("sink", "kafka"))
    assert kafka.aliases == ("broker",)
    assert kafka.module == "sinks/kafka/sink.py"


def test_wiring_declares_the_compilers_wiring_keys():
    for kind, keys in WIRING_KEYS.items():
        assert [f.name for f in dataclasses.fields(model.WIRING[kind])] == list(keys)


@dataclasses.dataclass
class Sample:
    count: int  # counted
    text: str = "a # b"  # the comment, not the hash in the string
    # a comment on its own line belongs to no key
    bare: bool = False
    items: list[str] = dataclasses.field(
        default_factory=list  # on a continuation line
    )


def test_meaning_is_the_comment_on_the_fields_line():
    keys = model.keys_of(Sample)
    assert {k.name: k.meaning for k in keys} == {
        "count": "counted",
        "text": "the comment, not the hash in the string",
        "bare": "",
        "items": "on a continuation line",
    }
    assert undocumented(keys, "sample") == ["sample.bare"]
    assert [(k.required, k.default) for k in keys] == [
        (True, None),
        (False, "a # b"),
        (False, False),
        (False, []),
    ]


def test_types_and_defaults_are_written_as_in_yaml():
    tail = {k.name: k for t in model.component_types() if t.name == "tail" for k in t.keys}
    assert markdown.yaml_type(tail["start_at"].annotation) == "one of: end, beginning"
    assert markdown.yaml_type(tail["paths"].annotation) == "list of string"
    assert markdown.yaml_type(tail["multiline"].annotation) == "mapping or null"
    assert markdown.yaml_type(tail["poll_interval"].annotation) == "duration"
    assert markdown.yaml_text(tail["poll_interval"].default) == "100ms"
    assert markdown.yaml_text(tail["forget_after"].default) == "1d"
    assert markdown.yaml_text(tail["read_chunk_bytes"].default) == "256KiB"
    assert markdown.yaml_text(tail["exclude"].default) == "[]"
    assert tail["paths"].required


def test_every_default_reads_back_as_the_default():
    """What the reference shows as a default, written in pipelines.yaml, gives the
    value the key has when it is left out."""
    for where, key in every_key():
        if key.required:
            continue
        text = markdown.yaml_text(key.default)
        errors = Errors("reference")
        value = convert(yaml.compose(text), key.annotation, where, errors)
        assert errors.items == [] and value == key.default, f"{where}: default shown as {text!r}"


@pytest.mark.parametrize(
    "text",
    ["64MiB", "512k", "1.5GB", "10", " 2 mb ", "1KiB", "7b", "1t", "64XB", "MiB", "-1k", "5s", ""],
)
def test_size_pattern_accepts_what_the_compiler_accepts(text):
    matches = re.search(json_schema.SIZE_PATTERN, text) is not None
    assert matches == (parse_size(text) is not None)


@pytest.mark.parametrize(
    "text", ["5s", "250ms", "2m", "1h", "1d", "1.5s", " 5 s ", "5", "5S", "ms", "5sec", "-1s"]
)
def test_duration_pattern_accepts_what_the_compiler_accepts(text):
    matches = re.search(json_schema.DURATION_PATTERN, text) is not None
    assert matches == (parse_duration(text) is not None)


# ---------------------------------------------------------------- (b) checked-in files


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_checked_in_reference_is_current(fmt):
    name = FILES[fmt]
    command = f"logflume agent reference --builtin-only --format {fmt} --output {name}"
    path = ROOT / name
    assert path.exists(), f"{name} is missing; make it with: {command}"
    assert path.read_text() == reference.render(fmt), (
        f"{name} is out of date; regenerate it with: {command}"
    )


# ---------------------------------------------------------------- (c) the schema


@pytest.fixture(scope="module")
def validator():
    schema = json_schema.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture
def pipelines():
    return yaml.safe_load((ROOT / "pipelines.yaml").read_text())


def error_paths(validator, document) -> list[tuple]:
    return sorted(tuple(e.absolute_path) for e in validator.iter_errors(document))


def compiler_errors(document) -> list[str]:
    _, errors = compile_text(yaml.safe_dump(document), "pipelines.yaml")
    return [str(e) for e in errors]


def test_repository_pipelines_file_is_valid(validator, pipelines):
    assert [e.message for e in validator.iter_errors(pipelines)] == []
    assert compiler_errors(pipelines) == []


WEB = ("agents", "web")
BAD = {
    "unknown component key": (
        (*WEB, "sinks", "nginx-kafka", "lingr_ms"),
        5,
        (*WEB, "sinks", "nginx-kafka"),
    ),
    "unknown interceptor key": (
        (*WEB, "sources", "nginx", "interceptors", 0, "fromat"),
        "combined",
        (*WEB, "sources", "nginx", "interceptors", 0),
    ),
    "unknown agent key": ((*WEB, "sorces"), {}, WEB),
    "unknown nested key": (
        (*WEB, "metrics", "port"),
        8286,
        (*WEB, "metrics"),
    ),
    "int as text": (
        (*WEB, "channels", "nginx", "capacity"),
        "lots",
        (*WEB, "channels", "nginx", "capacity"),
    ),
    "size without a number": (
        (*WEB, "channels", "nginx", "byte_capacity"),
        "MiB",
        (*WEB, "channels", "nginx", "byte_capacity"),
    ),
    "duration in words": ((*WEB, "shutdown_grace"), "10 sec", (*WEB, "shutdown_grace")),
    "word not in the list": (
        (*WEB, "sources", "nginx", "start_at"),
        "middle",
        (*WEB, "sources", "nginx", "start_at"),
    ),
    "text for a list": (
        (*WEB, "sources", "nginx", "paths"),
        "access.log",
        (*WEB, "sources", "nginx", "paths"),
    ),
    "list for text": (
        (*WEB, "sinks", "netcat-kafka", "topic"),
        ["a", "b"],
        (*WEB, "sinks", "netcat-kafka", "topic"),
    ),
    "unknown type": (
        (*WEB, "sinks", "netcat-kafka", "type"),
        "kafak",
        (*WEB, "sinks", "netcat-kafka", "type"),
    ),
}


def put(document, path, value):
    *parents, last = path
    for step in parents:
        document = document[step]
    document[last] = value


@pytest.mark.parametrize("case", sorted(BAD))
def test_schema_rejects_unknown_keys_and_wrong_types(validator, pipelines, case):
    path, value, where = BAD[case]
    put(pipelines, path, value)
    assert where in error_paths(validator, pipelines)
    assert compiler_errors(pipelines) != []  # the schema rejects what the compiler rejects


def test_schema_requires_what_the_compiler_requires(validator, pipelines):
    sink = (*WEB, "sinks", "netcat-kafka")
    for key in ("topic", "channel"):
        document = copy.deepcopy(pipelines)
        del document["agents"]["web"]["sinks"]["netcat-kafka"][key]
        assert sink in error_paths(validator, document), key
        assert any(
            f"netcat-kafka.{key}: missing required key" in e for e in compiler_errors(document)
        )


def test_environment_references_are_accepted_for_any_scalar(validator, pipelines, monkeypatch):
    values = {
        (*WEB, "channels", "nginx", "capacity"): ("${CAPACITY}", "5000"),
        (*WEB, "channels", "nginx", "byte_capacity"): ("${BYTES:-64MiB}", None),
        (*WEB, "shutdown_grace"): ("${GRACE}", "5s"),
        (*WEB, "sources", "nginx", "start_at"): ("${START}", "end"),
        (*WEB, "sinks", "nginx-kafka", "enable_idempotence"): ("${IDEMPOTENT}", "true"),
        (*WEB, "sinks", "netcat-kafka", "acks"): ("${ACKS}", "-1"),
    }
    for path, (text, env) in values.items():
        put(pipelines, path, text)
        name = re.match(r"\$\{(\w+)", text).group(1)
        if env is not None:
            monkeypatch.setenv(name, env)
        else:
            monkeypatch.delenv(name, raising=False)
    assert error_paths(validator, pipelines) == []
    assert compiler_errors(pipelines) == []


def test_an_alias_gets_the_keys_of_its_type(validator, pipelines):
    put(pipelines, (*WEB, "sinks", "netcat-kafka", "type"), "broker")
    assert error_paths(validator, pipelines) == []
    put(pipelines, (*WEB, "sinks", "netcat-kafka", "lingr_ms"), 5)
    assert error_paths(validator, pipelines) == [(*WEB, "sinks", "netcat-kafka")]


# ---------------------------------------------------------------- (d) the command


def logflume(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logflume", *args], capture_output=True, text=True, cwd=cwd
    )


def test_command_prints_the_json_schema():
    """With the installed plugins' types, as the command's output has them (none are
    installed here, tests/agent/test_plugins.py installs some)."""
    done = logflume("agent", "reference", "--format", "json-schema")
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == json_schema.json_schema(plugins=True)


def test_command_writes_markdown_to_a_file(tmp_path):
    out = tmp_path / "reference.md"
    done = logflume("agent", "reference", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert out.read_text() == markdown.markdown(plugins=True)
    assert out.read_text().startswith("# pipelines.yaml reference\n")
