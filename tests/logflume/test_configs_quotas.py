"""`logflume configs` on client quotas, end to end against a broker process:
clients, users (sharing the entity with SCRAM credentials), the (user, client id)
pair, defaults, describe as text and JSON, and deletion."""

import json

from tests.logflume.test_commands_clients import lf


def run(broker, *args) -> str:
    r = lf("configs", "--bootstrap-server", broker.bootstrap, *args)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def test_quotas_of_clients_users_pairs_and_defaults(broker):
    out = run(
        broker, "--entity-type", "clients", "--entity-name", "app", "--alter",
        "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    )  # fmt: skip
    assert out == "Completed updating config for client app.\n"
    run(broker, "--entity-type", "clients", "--entity-default", "--alter",
        "--add-config", "producer_byte_rate=1000")  # fmt: skip
    # a user's quota and its SCRAM credential in one command, one entity
    out = run(
        broker, "--entity-type", "users", "--entity-name", "alice", "--alter",
        "--add-config", "SCRAM-SHA-256=[password=alice-secret],consumer_byte_rate=4096",
    )  # fmt: skip
    assert out == "Completed updating config for user alice.\n"
    run(
        broker, "--entity-type", "users", "--entity-name", "alice",
        "--entity-type", "clients", "--entity-default", "--alter",
        "--add-config", "request_percentage=50",
    )  # fmt: skip

    out = run(broker, "--entity-type", "clients", "--describe")
    assert sorted(out.splitlines()) == [
        "Quota configs for client-id 'app' are "
        "consumer_byte_rate=2097152.0,producer_byte_rate=1048576.0",
        "Quota configs for the default client-id are producer_byte_rate=1000.0",
    ]
    out = run(broker, "--entity-type", "users", "--entity-name", "alice", "--describe")
    assert out.splitlines() == [
        "Quota configs for user-principal 'alice' are consumer_byte_rate=4096.0",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096",
    ]
    out = run(
        broker, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
        "--describe", "--output", "json",
    )  # fmt: skip
    assert json.loads(out) == [
        {
            "entity_type": "users",
            "entity_name": "alice",
            "client_id": None,
            "configs": [{"name": "request_percentage", "value": 50.0}],
        }
    ]
    out = run(broker, "--entity-type", "users", "--describe", "--output", "json")
    assert json.loads(out) == [
        {
            "entity_type": "users",
            "entity_name": "alice",
            "configs": [
                {"name": "consumer_byte_rate", "value": 4096.0},
                {"name": "SCRAM-SHA-256", "iterations": 4096},
            ],
        }
    ]

    out = run(broker, "--entity-type", "clients", "--entity-default", "--alter",
              "--delete-config", "producer_byte_rate")  # fmt: skip
    assert out == "Completed updating default config for clients in the cluster.\n"
    out = run(broker, "--entity-type", "clients", "--entity-default", "--describe")
    assert out == ""
