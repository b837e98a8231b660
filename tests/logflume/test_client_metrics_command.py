"""`logflume client-metrics` as a user runs it (kafka-client-metrics.sh's flags)
against a broker subprocess: list, alter, describe, delete, and what it refuses."""

import uuid

from tests.logflume.test_commands_clients import lf


def cm(broker, *args):
    return lf("client-metrics", "--bootstrap-server", broker.bootstrap, *args)


def lines(result) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.decode().splitlines()


def test_alter_describe_list_and_delete(module_broker):
    assert lines(cm(module_broker, "--list")) == []
    altered = cm(
        module_broker, "--alter", "--name", "producers",
        "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
        "--interval", "1000", "--match", "client_id=nginx-.*,client_software_name=confluent.*",
    )  # fmt: skip
    assert lines(altered) == ["Altered client metrics config for producers."]
    assert lines(cm(module_broker, "--describe", "--name", "producers")) == [
        "Client metrics configs for producers are:",
        "  interval.ms=1000",
        "  match=client_id=nginx-.*,client_software_name=confluent.*",
        "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.",
    ]
    generated = lines(cm(module_broker, "--alter", "--generate-name", "--metrics", "*"))
    name = generated[0].removeprefix("Altered client metrics config for ").removesuffix(".")
    uuid.UUID(name)
    assert sorted(lines(cm(module_broker, "--list"))) == sorted(["producers", name])
    everything = lines(cm(module_broker, "--describe"))
    assert f"Client metrics configs for {name} are:" in everything and "  metrics=*" in everything

    # an empty value deletes the key; the others stay
    assert cm(module_broker, "--alter", "--name", "producers", "--match", "").returncode == 0
    assert lines(cm(module_broker, "--describe", "--name", "producers"))[1:] == [
        "  interval.ms=1000",
        "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.",
    ]
    deleted = cm(module_broker, "--delete", "--name", "producers")
    assert lines(deleted) == ["Deleted client metrics config for producers."]
    assert lines(cm(module_broker, "--list")) == [name]
    assert lines(cm(module_broker, "--delete", "--name", name))
    assert lines(cm(module_broker, "--list")) == []


def test_values_the_broker_refuses_are_reported(module_broker):
    r = cm(module_broker, "--alter", "--name", "bad", "--interval", "50")
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "INVALID_REQUEST" in err and "interval must be between 100 and 3600000" in err, err
    r = cm(module_broker, "--alter", "--name", "bad", "--match", "colour=red")
    assert r.returncode == 1 and "Illegal client matching pattern: colour=red" in r.stderr.decode()
    assert lines(cm(module_broker, "--list")) == []


def test_flags_are_checked_as_kafka_checks_them(module_broker):
    cases = [
        (["--alter", "--metrics", "*"], "One of --name or --generate-name must be specified"),
        (["--alter", "--name", "a", "--generate-name"], "One of --name or --generate-name"),
        (["--delete"], "A client metrics resource name must be specified with --delete."),
        (["--list", "--name", "a"], 'Option "[list]" can\'t be used with option "[name]"'),
        (["--describe", "--interval", "5"], 'can\'t be used with option "[interval]"'),
    ]
    for args, message in cases:
        r = cm(module_broker, *args)
        assert r.returncode == 1 and message in r.stderr.decode(), (args, r.stderr)
    r = cm(module_broker, "--name", "a")
    assert r.returncode == 2 and b"one of the arguments" in r.stderr  # no action


def test_an_unreachable_broker_is_an_error_not_a_traceback():
    r = lf("client-metrics", "--bootstrap-server", "127.0.0.1:1", "--list", "--timeout-ms", "2000")
    assert r.returncode == 1 and b"cannot reach 127.0.0.1:1" in r.stderr
    assert b"Traceback" not in r.stderr
