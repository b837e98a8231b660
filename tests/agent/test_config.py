"""The pipeline compiler: every error, with file:line:column, in one pass."""

import os
import re
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest

import tests.agent.fakes  # noqa: F401 - registers test-* plugins
from agent.config import compile_file, compile_text
from agent.plugins import load_plugins


def compile_(text):
    return compile_text(textwrap.dedent(text).lstrip("\n"), "pipelines.yaml")


def errors_of(text):
    agents, errors = compile_(text)
    assert not agents
    return [str(e) for e in errors]


GOOD = """
agents:
  web:
    metrics: {listen: 127.0.0.1:8286}
    shutdown_grace: 3s
    sources:
      gen: {type: test-gen, count: 5, channels: [mem]}
    channels:
      mem: {type: memory, capacity: 1000, byte_capacity: 1MiB}
    sinks:
      out: {type: console, channel: mem}
"""


def test_valid_file_compiles_with_typed_configs():
    agents, errors = compile_(GOOD)
    assert errors == []
    web = agents["web"]
    assert web.settings.shutdown_grace == 3.0
    assert web.settings.metrics.listen == "127.0.0.1:8286"
    assert web.channels["mem"].config.byte_capacity == 1 << 20
    assert web.sources["gen"].config.count == 5
    assert web.sources["gen"].channels == ("mem",)
    assert web.sinks["out"].channel == "mem"


def test_wrong_type_names_line_column_and_path():
    errors = errors_of(GOOD.replace("count: 5", "count: abc"))
    assert errors == ["pipelines.yaml:6:36: agents.web.sources.gen.count: expected int, got 'abc'"]


def test_unknown_type_lists_known_ones():
    (error,) = errors_of(GOOD.replace("type: memory", "type: memroy"))
    assert error.startswith(
        "pipelines.yaml:8:19: agents.web.channels.mem.type: unknown channel type 'memroy'"
    )
    assert "memory" in error and "file" in error


def test_unknown_key_suggests_the_close_one():
    (error,) = errors_of(GOOD.replace("capacity: 1000", "capcity: 1000"))
    assert error.startswith(
        "pipelines.yaml:8:27: agents.web.channels.mem.capcity: unknown key 'capcity'"
    )
    assert "did you mean 'capacity'" in error


def test_missing_required_key():
    (error,) = errors_of(GOOD.replace("type: console, channel: mem", "type: file, channel: mem"))
    assert error == "pipelines.yaml:10:12: agents.web.sinks.out.directory: missing required key"


def test_dangling_channel_reference_and_unread_channel():
    errors = errors_of(GOOD.replace("channel: mem}", "channel: memo}"))
    assert errors == [
        "pipelines.yaml:10:37: agents.web.sinks.out.channel: unknown channel 'memo' (channels: mem)",
        "pipelines.yaml:8:12: agents.web.channels.mem: no sink reads this channel",
    ]


def test_port_clash_between_sources_and_metrics():
    text = GOOD.replace(
        "gen: {type: test-gen, count: 5, channels: [mem]}",
        "a: {type: test-gen, listen: 0.0.0.0:8285, channels: [mem]}\n"
        "      b: {type: test-gen, listen: 127.0.0.1:8285, channels: [mem]}",
    )
    (error,) = errors_of(text)
    assert error == (
        "pipelines.yaml:7:10: agents.web.sources.b: udp port 8285 already used by agents.web.sources.a"
    )


def test_unreadable_path_reported_by_the_component_validate(tmp_path):
    missing = tmp_path / "nope" / "access.log"
    (error,) = errors_of(GOOD.replace("count: 5", f"path: {missing}"))
    assert error.startswith("pipelines.yaml:6:35: agents.web.sources.gen.path: cannot read")


def test_several_errors_at_once_in_file_order_of_discovery():
    text = """
    agents:
      web:
        shutdown_grace: soon
        sources:
          gen: {type: test-gen, count: x, channels: [mem, nowhere], bogus: 1}
          net: {type: nosuch, channels: [mem]}
        channels:
          mem: {type: memory, byte_capacity: lots}
          spare: {type: memory}
        sinks:
          out: {type: broker, channel: mem, acks: 2}
    """
    errors = errors_of(text)
    assert errors == [
        "pipelines.yaml:3:21: agents.web.shutdown_grace: expected duration (e.g. 5s), got 'soon'",
        "pipelines.yaml:5:36: agents.web.sources.gen.count: expected int, got 'x'",
        errors[2],
        "pipelines.yaml:6:19: agents.web.sources.net.type: " + errors[3].split(".type: ", 1)[1],
        "pipelines.yaml:8:42: agents.web.channels.mem.byte_capacity: expected size (e.g. 64MiB), got 'lots'",
        "pipelines.yaml:11:47: agents.web.sinks.out.acks: expected 'all' | -1 | 0 | 1, got 2",
        "pipelines.yaml:11:12: agents.web.sinks.out.topic: missing required key",
        "pipelines.yaml:5:55: agents.web.sources.gen.channels[1]: unknown channel 'nowhere' (channels: mem, spare)",
        "pipelines.yaml:9:14: agents.web.channels.spare: no sink reads this channel",
    ]
    assert errors[2].startswith(
        "pipelines.yaml:5:65: agents.web.sources.gen.bogus: unknown key 'bogus'"
    )


def test_cross_field_validate_points_at_the_key():
    errors = errors_of(
        GOOD.replace("type: console, channel: mem", "type: broker, channel: mem, topic: t, acks: 1")
    )
    assert errors == [
        "pipelines.yaml:10:12: agents.web.sinks.out.enable_idempotence: "
        "needs acks: all (or set it to false)"
    ]


def test_an_audit_drill_needs_the_audit_and_counts_of_zero_or_more():
    sink = "type: broker, channel: mem, topic: t, audit: false, audit_drill: {drop: -1}"
    errors = errors_of(GOOD.replace("type: console, channel: mem", sink))
    assert errors == [
        "pipelines.yaml:10:78: agents.web.sinks.out.audit_drill: "
        "needs audit: true (the drill checks the audit)",
        "pipelines.yaml:10:78: agents.web.sinks.out.audit_drill: drop and duplicate must be >= 0",
    ]


def test_an_exactly_once_sink_needs_a_channel_of_its_own():
    text = GOOD.replace(
        "out: {type: console, channel: mem}",
        "out: {type: console, channel: mem}\n"
        "      k: {type: broker, channel: mem, topic: t, delivery: exactly_once}",
    )
    assert errors_of(text) == [
        "pipelines.yaml:11:34: agents.web.sinks.k.channel: delivery: exactly_once needs "
        "a channel of its own; out also reads 'mem'"
    ]


def test_selector_routes_must_name_the_sources_channels():
    text = GOOD.replace(
        "channels: [mem]}",
        "channels: [mem], selector: {type: multiplexing, header: level, mapping: {error: [other]}}}",
    )
    (error,) = errors_of(text)
    assert error == (
        "pipelines.yaml:6:66: agents.web.sources.gen.selector: "
        "'error' routes to 'other', which is not in this source's channels"
    )


def test_yaml_syntax_error_has_a_position():
    (error,) = errors_of("agents:\n  web: {sources: [\n")
    assert error.startswith("pipelines.yaml:3:1: invalid YAML")


def test_interceptor_config_is_compiled_too():
    errors = errors_of(
        GOOD.replace(
            "channels: [mem]}", "channels: [mem], interceptors: [{type: test-drop-odd, x: 1}]}"
        )
    )
    assert errors[0].startswith(
        "pipelines.yaml:6:93: agents.web.sources.gen.interceptors[0].x: unknown key 'x'"
    )


TAIL = """
agents:
  web:
    sources:
      logs:
        type: tail
        paths: {paths}
        channels: [mem]
    channels:
      mem: {{type: memory}}
    sinks:
      out: {{type: console, channel: mem}}
"""


def tail_errors(paths: list[str]) -> list[str]:
    return errors_of(TAIL.format(paths="[" + ", ".join(f'"{p}"' for p in paths) + "]"))


def test_tail_paths_in_a_missing_directory_or_naming_a_directory_are_errors(tmp_path):
    """The rule (sources/tail.py, check_paths): an absolute glob whose fixed directory
    does not exist is a typo or a host not ready yet, so it is reported; a literal
    path that is a directory is a mistake for `dir/*.log`."""
    (tmp_path / "file").write_text("")
    missing, plain_dir, not_dir = (
        f"{tmp_path}/nonexistent/dir/*.log",
        str(tmp_path),
        f"{tmp_path}/file/*.log",
    )
    assert tail_errors([missing, plain_dir, not_dir]) == [
        f"pipelines.yaml:6:16: agents.web.sources.logs.paths: '{missing}': directory"
        f" {tmp_path}/nonexistent/dir does not exist (create it if the program writing"
        " there starts later)",
        f"pipelines.yaml:6:16: agents.web.sources.logs.paths: '{plain_dir}': is a directory"
        f" (to follow its files use a glob like {plain_dir}/*.log)",
        f"pipelines.yaml:6:16: agents.web.sources.logs.paths: '{not_dir}': {tmp_path}/file"
        " is not a directory",
    ]


def test_tail_paths_that_match_nothing_yet_are_fine(tmp_path, monkeypatch):
    """Files appear later in an existing directory; a relative path is resolved
    against whoever validates, so a missing relative directory is not judged."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    paths = [f"{tmp_path}/logs/*.log", f"{tmp_path}/logs/app.log", "data/demo/access.log"]
    agents, errors = compile_(TAIL.format(paths=str(paths).replace("'", '"')))
    assert errors == [] and list(agents) == ["web"]


@pytest.fixture
def shared_dir():
    """A directory another user can reach (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="logflume-perm-"))
    path.chmod(0o755)
    yield path
    for sub in path.rglob("*"):
        sub.chmod(0o755)
    shutil.rmtree(path)


def compile_as_unprivileged(config: Path) -> list[str]:
    """compile_file's errors as seen by a user without special rights: as root (who
    reads everything) in a forked child that became nobody; otherwise directly."""
    if os.getuid() != 0:
        return [str(e) for e in compile_file(config)[1]]
    load_plugins()  # the child may not be able to import anything new
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            errors = [str(e) for e in compile_file(config)[1]]
            os.write(write, "\n".join(errors).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return out.splitlines()


def test_tail_paths_the_agent_cannot_read_are_errors_with_their_line(shared_dir):
    """An unlistable directory and an unreadable file each get their key and line."""
    locked, logs = shared_dir / "locked", shared_dir / "logs"
    locked.mkdir(mode=0o000)
    logs.mkdir(mode=0o755)
    secret = logs / "secret.log"
    secret.write_text("x\n")
    secret.chmod(0o000)
    locked.chmod(0o000)
    config = shared_dir / "pipelines.yaml"
    text = textwrap.dedent(TAIL).lstrip("\n").format(paths=f"[{locked}/*.log, {secret}]")
    config.write_text(text)
    config.chmod(0o644)
    where = f"{config}:6:16: agents.web.sources.logs.paths:"
    assert compile_as_unprivileged(config) == [
        f"{where} '{locked}/*.log': cannot list directory {locked} (permission denied)",
        f"{where} '{secret}': cannot read {secret} (permission denied)",
    ]


# -- ${VAR} in values -------------------------------------------------------------------


def test_environment_variables_fill_values_with_the_type_their_key_asks_for(monkeypatch):
    monkeypatch.setenv("LF_COUNT", "7")
    monkeypatch.setenv("LF_SECRET", "p#ss: word")
    monkeypatch.setenv("LF_ZIP", "007")
    monkeypatch.delenv("LF_UNSET", raising=False)
    text = GOOD.replace("count: 5", 'count: "${LF_COUNT}", prefix: "${LF_SECRET}"').replace(
        "127.0.0.1:8286", '"${LF_UNSET:-127.0.0.1:9399}"'
    )
    text += "  block:\n    sources:\n      gen:\n        type: test-gen\n"
    text += "        count: ${LF_COUNT}\n        prefix: ${LF_ZIP}\n        channels: [mem]\n"
    text += "    channels:\n      mem: {type: memory}\n"
    text += "    sinks:\n      out: {type: console, channel: mem}\n"
    agents, errors = compile_(text)
    assert errors == []
    web, block = agents["web"], agents["block"]
    assert web.sources["gen"].config.count == 7
    assert web.settings.metrics.listen == "127.0.0.1:9399"
    assert web.sources["gen"].config.prefix == "p#ss: word"  # never re-parsed as YAML
    assert block.sources["gen"].config.count == 7
    assert block.sources["gen"].config.prefix == "007"  # a str key keeps it as written


def test_an_unset_variable_names_its_key_and_line(monkeypatch):
    monkeypatch.delenv("LF_BROKERS", raising=False)
    errors = errors_of(GOOD.replace("count: 5", 'count: "${LF_BROKERS}"'))
    assert errors == [
        "pipelines.yaml:6:36: agents.web.sources.gen.count: environment variable LF_BROKERS "
        "is not set (write ${LF_BROKERS:-default} to give a default)"
    ]


def test_an_expanded_value_of_the_wrong_type_is_an_error_like_any_other(monkeypatch):
    monkeypatch.setenv("LF_COUNT", "many")
    errors = errors_of(GOOD.replace("count: 5", 'count: "${LF_COUNT}"'))
    assert errors == ["pipelines.yaml:6:36: agents.web.sources.gen.count: expected int, got 'many'"]


def test_the_kafka_sink_answers_to_its_old_name_broker_too():
    kafka = "type: kafka, channel: mem, topic: t"
    old = "type: broker, channel: mem, topic: t"
    new_agents, new_errors = compile_(GOOD.replace("type: console, channel: mem", kafka))
    old_agents, old_errors = compile_(GOOD.replace("type: console, channel: mem", old))
    assert new_errors == old_errors == []
    assert new_agents["web"].sinks["out"].cls is old_agents["web"].sinks["out"].cls
    assert new_agents["web"].sinks["out"].cls.type_name == "kafka"


def test_a_components_checks_run_in_the_same_pass_as_its_type_errors(tmp_path):
    """One pass lists everything: a key of the wrong type no longer hides what the
    component's own checks find in the keys that did parse (here: tail's paths)."""
    missing = f"{tmp_path}/nonexistent/*.log"
    text = TAIL.format(paths=f'["{missing}"]').replace(
        "        channels: [mem]\n", "        channels: [mem]\n        batch_size: lots\n", 1
    )
    assert errors_of(text) == [
        "pipelines.yaml:8:21: agents.web.sources.logs.batch_size: expected int, got 'lots'",
        f"pipelines.yaml:6:16: agents.web.sources.logs.paths: '{missing}': directory"
        f" {tmp_path}/nonexistent does not exist (create it if the program writing"
        " there starts later)",
    ]


def test_checks_of_a_key_that_failed_to_parse_are_not_reported_twice(tmp_path):
    """Only findings about keys that parsed are added: a check that would run on the
    default standing in for a broken key could only report nonsense."""
    text = GOOD.replace(
        "type: memory, capacity: 1000, byte_capacity: 1MiB",
        "type: file, capacity: many, byte_capacity: 0",
    )
    assert errors_of(text) == [
        "pipelines.yaml:8:35: agents.web.channels.mem.capacity: expected int, got 'many'"
    ]


def test_checks_of_a_key_whose_variable_or_file_failed_are_not_reported_either(
    tmp_path, monkeypatch
):
    """A `${VAR}` not set or a `${file:...}` not readable is reported when the file's
    values are expanded, before any component is compiled: its key is broken all the
    same, and a check of the default standing in for it (here: a hash mode without a
    salt) is not reported."""
    monkeypatch.delenv("LF_IP_SALT", raising=False)
    gen = "{type: test-gen, count: 5, channels: [mem]}"
    for salt, error in (
        ("${LF_IP_SALT}", "environment variable LF_IP_SALT is not set"),
        (f"${{file:{tmp_path}/ip-salt}}", f"cannot read {tmp_path}/ip-salt"),
    ):
        interceptor = f'{{type: anonymize_ip, mode: hash, salt: "{salt}"}}'
        text = GOOD.replace(gen, gen[:-1] + f", interceptors: [{interceptor}]}}")
        (found,) = errors_of(text)
        where = r"pipelines\.yaml:6:\d+: agents\.web\.sources\.gen\.interceptors\[0\]\.salt: "
        assert re.match(where + re.escape(error), found), found


# -- the kafka sink's tls: and sasl: blocks ----------------------------------------------

SECURED = GOOD.replace(
    "out: {type: console, channel: mem}",
    """out:
        type: kafka
        channel: mem
        topic: t
        tls: {ca: CA}
        sasl: {mechanism: SCRAM-SHA-512, username: web, password: "${LF_SASL_PASSWORD}"}""",
)


def test_sasl_and_tls_blocks_map_to_librdkafka_and_hide_the_password(tmp_path, monkeypatch):
    from sinks.kafka.security import librdkafka_security

    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("LF_SASL_PASSWORD", "s3cret: #1")
    agents, errors = compile_(SECURED.replace("CA", str(ca)))
    assert errors == []
    config = agents["web"].sinks["out"].config
    assert librdkafka_security(config.tls, config.sasl) == {
        "security.protocol": "SASL_SSL",
        "enable.ssl.certificate.verification": True,
        "ssl.ca.location": str(ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "web",
        "sasl.password": "s3cret: #1",
    }
    assert "s3cret" not in repr(agents)
    assert librdkafka_security(None, config.sasl)["security.protocol"] == "SASL_PLAINTEXT"
    assert librdkafka_security(config.tls, None)["security.protocol"] == "SSL"


def test_a_secret_can_come_from_a_file(tmp_path, monkeypatch):
    secret = tmp_path / "password"
    secret.write_text("from-a-file\n")
    text = SECURED.replace("tls: {ca: CA}\n        ", "")
    text = text.replace("${LF_SASL_PASSWORD}", f"${{file:{secret}}}")
    agents, errors = compile_(text)
    assert errors == []
    assert agents["web"].sinks["out"].config.sasl.password == "from-a-file"
    secret.unlink()
    assert errors_of(text) == [
        f"pipelines.yaml:14:67: agents.web.sinks.out.sasl.password: cannot read {secret}: "
        "No such file or directory"
    ]


def test_errors_of_the_security_blocks_name_key_and_line(monkeypatch):
    monkeypatch.setenv("LF_SASL_PASSWORD", "x")
    text = SECURED.replace("CA", "/nonexistent/ca.pem").replace("SCRAM-SHA-512", "SCRAM-MD5")
    text = text.replace(', password: "${LF_SASL_PASSWORD}"', "")
    assert errors_of(text) == [
        "pipelines.yaml:15:27: agents.web.sinks.out.sasl.mechanism: expected "
        "'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512', got 'SCRAM-MD5'",
        "pipelines.yaml:15:15: agents.web.sinks.out.sasl.password: missing required key",
        "pipelines.yaml:14:19: agents.web.sinks.out.tls.ca: cannot read /nonexistent/ca.pem: "
        "No such file or directory",
    ]


# -- ${HOST} and the kafka sink's templates ---------------------------------------------


def test_host_is_this_machines_name_unless_the_environment_sets_it(monkeypatch):
    import socket

    text = GOOD.replace("count: 5", 'count: 5, prefix: "${HOST}-"')
    monkeypatch.delenv("HOST", raising=False)
    agents, errors = compile_(text)
    assert errors == []
    assert agents["web"].sources["gen"].config.prefix == f"{socket.gethostname()}-"
    monkeypatch.setenv("HOST", "web7.example")
    agents, _ = compile_(text)
    assert agents["web"].sources["gen"].config.prefix == "web7.example-"


KAFKA = GOOD.replace("type: console, channel: mem", "type: kafka, channel: mem, topic: TOPIC")


def test_kafka_topic_and_key_templates_compile():
    sink = 'topic: "nginx-{host}", key: "{host}", dead_letter_topic: nginx.dlq'
    text = KAFKA.replace("topic: TOPIC", sink)
    agents, errors = compile_(text)
    assert errors == []
    config = agents["web"].sinks["out"].config
    assert (config.topic, config.key, config.headers) == ("nginx-{host}", "{host}", ["host"])


def test_malformed_kafka_templates_are_errors_with_key_and_line():
    text = KAFKA.replace("topic: TOPIC", 'topic: "nginx-{host", key: "{}"')
    assert errors_of(text) == [
        "pipelines.yaml:10:47: agents.web.sinks.out.topic: "
        "\"{\" not closed, at column 7 of 'nginx-{host'",
        "pipelines.yaml:10:67: agents.web.sinks.out.key: "
        "placeholder {} at column 1 of '{}': a name is letters, digits and _ . - @",
    ]
    text = KAFKA.replace("topic: TOPIC", 'topic: "nginx-{host}"')
    assert errors_of(text) == [
        "pipelines.yaml:10:47: agents.web.sinks.out.topic: a template needs dead_letter_topic "
        "(a plain topic name, for the records whose topic cannot be made)"
    ]


def test_the_old_key_options_are_gone_and_say_so():
    (error,) = errors_of(KAFKA.replace("topic: TOPIC", "topic: t, key_header: host"))
    assert "agents.web.sinks.out.key_header: unknown key" in error
