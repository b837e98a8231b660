"""The pipeline compiler: every error, with file:line:column, in one pass."""

import textwrap

import tests.agent.fakes  # noqa: F401 - registers test-* plugins
from agent.config import compile_text


def compile_(text):
    return compile_text(textwrap.dedent(text).lstrip("\n"), "pipelines.yaml")


def errors_of(text):
    agents, errors = compile_(text)
    assert not agents
    return [str(e) for e in errors]


GOOD = """
agents:
  web:
    metrics: {listen: 127.0.0.1:9273}
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
    assert web.settings.metrics.listen == "127.0.0.1:9273"
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
