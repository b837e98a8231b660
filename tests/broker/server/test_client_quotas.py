"""Client quotas on one broker process: DescribeClientQuotas and AlterClientQuotas
over the wire (filters, Kafka's errors, validate_only, persistence across a
restart), and their enforcement on real clients: a confluent-kafka producer and
consumer over their byte-rate quota are told to throttle, and the broker's
throttle-time metric grows."""

import pytest
from confluent_kafka import Consumer, Producer

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient
from common.ports import free_port
from testkit.kafka import create_topic
from testkit.procs import BrokerProcess, wait_until
from testkit.scrape import scrape
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


@pytest.fixture
def broker(tmp_path):
    metrics_port = free_port()
    b = BrokerProcess(
        tmp_path / "data", settings={"metrics.listen": f"127.0.0.1:{metrics_port}"}
    ).start()
    b.metrics_port = metrics_port
    yield b
    b.stop()


def entity(user=False, client=False) -> list[dict]:
    """False: no component of that type; None: the default entity."""
    out = []
    if user is not False:
        out.append({"entity_type": "user", "entity_name": user})
    if client is not False:
        out.append({"entity_type": "client-id", "entity_name": client})
    return out


def alter(c, entries, validate_only=False) -> list[tuple[int, str | None]]:
    body = {
        "entries": [
            {
                "entity": ent,
                "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops.items()],
            }
            for ent, ops in entries
        ],
        "validate_only": validate_only,
    }
    answer = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, body)
    return [(e["error_code"], e["error_message"]) for e in answer["entries"]]


def describe(c, components, strict=False, version=1):
    body = {"components": components, "strict": strict}
    answer = c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, body)
    if answer["error_code"]:
        return answer["error_code"]
    found = [
        (
            tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]),
            {v["key"]: v["value"] for v in entry["values"]},
        )
        for entry in answer["entries"]
    ]
    return sorted(found, key=repr)


def names(described) -> set:
    return {e for e, _ in described}


def component(kind, match_type, match=None) -> dict:
    return {"entity_type": kind, "match_type": match_type, "match": match}


ALL = [
    (entity(user="alice"), {"producer_byte_rate": 1000.0}),
    (entity(user=None), {"consumer_byte_rate": 2000.0}),
    (entity(client="app"), {"producer_byte_rate": 3000.0, "request_percentage": 12.5}),
    (entity(user="alice", client="app"), {"consumer_byte_rate": 4000.0}),
    (entity(user=None, client=None), {"producer_byte_rate": 5000.0}),
]
ALICE = (("user", "alice"),)
USER_DEFAULT = (("user", None),)
APP = (("client-id", "app"),)
ALICE_APP = (("user", "alice"), ("client-id", "app"))
DEFAULTS = (("user", None), ("client-id", None))


def test_alter_then_describe_with_each_filter(broker):
    with WireClient(broker.port) as c:
        assert alter(c, ALL) == [(0, None)] * len(ALL)
        every = describe(c, [])
        assert names(every) == {ALICE, USER_DEFAULT, APP, ALICE_APP, DEFAULTS}
        assert dict(every)[APP] == {"producer_byte_rate": 3000.0, "request_percentage": 12.5}
        assert describe(c, [], strict=True) == []

        exact = [component("user", EXACT, "alice")]
        assert names(describe(c, exact)) == {ALICE, ALICE_APP}
        assert names(describe(c, exact, strict=True)) == {ALICE}

        default = [component("user", DEFAULT)]
        assert names(describe(c, default)) == {USER_DEFAULT, DEFAULTS}
        assert describe(c, default, strict=True) == [(USER_DEFAULT, {"consumer_byte_rate": 2000.0})]

        specified = [component("user", SPECIFIED)]
        assert names(describe(c, specified, strict=True)) == {ALICE, USER_DEFAULT}
        assert names(describe(c, specified)) == {ALICE, USER_DEFAULT, ALICE_APP, DEFAULTS}

        pair = [component("user", EXACT, "alice"), component("client-id", EXACT, "app")]
        assert describe(c, pair, strict=True) == [(ALICE_APP, {"consumer_byte_rate": 4000.0})]
        clients = [component("client-id", SPECIFIED)]
        assert names(describe(c, clients, strict=True)) == {APP}
        assert describe(c, [component("user", EXACT, "nobody")]) == []

        # removing every key removes the entity
        assert alter(c, [(entity(client="app"), {"producer_byte_rate": None})]) == [(0, None)]
        assert alter(c, [(entity(client="app"), {"request_percentage": None})]) == [(0, None)]
        assert describe(c, clients, strict=True) == []
        # v0 (not flexible) answers the same
        assert describe(c, exact, strict=True, version=0) == [
            (ALICE, {"producer_byte_rate": 1000.0})
        ]


def test_kafkas_errors_and_validate_only(broker):
    invalid = ErrorCode.INVALID_REQUEST
    with WireClient(broker.port) as c:
        answers = alter(
            c,
            [
                (entity(user="u"), {"no_such_key": 1.0}),
                (entity(user="u"), {"producer_byte_rate": -5.0}),
                (entity(user="u"), {"producer_byte_rate": 10.5}),
                (entity(user="u"), {"SCRAM-SHA-256": 1.0}),
                ([], {"producer_byte_rate": 1.0}),
                (entity(user="a") + entity(user="b"), {"producer_byte_rate": 1.0}),
                ([{"entity_type": "ip", "entity_name": "1.2.3.4"}], {"producer_byte_rate": 1.0}),
                (entity(user="ok"), {"producer_byte_rate": 10.0000000001}),
            ],
        )
        assert [code for code, _ in answers] == [invalid] * 6 + [
            ErrorCode.UNSUPPORTED_VERSION,
            ErrorCode.NONE,
        ]
        assert answers[0][1] == "Invalid configuration key no_such_key"
        assert describe(c, []) == [((("user", "ok"),), {"producer_byte_rate": 10.0})]

        assert alter(c, [(entity(client="v"), {"consumer_byte_rate": 7.0})], True) == [(0, None)]
        assert describe(c, [component("client-id", SPECIFIED)]) == []

        for bad in (
            [component("", EXACT, "x")],
            [component("user", EXACT, "a"), component("user", EXACT, "b")],
            [component("user", 7)],
            [component("user", EXACT, None)],
        ):
            assert describe(c, bad) == invalid
        assert describe(c, [component("ip", SPECIFIED)]) == ErrorCode.UNSUPPORTED_VERSION


def test_quotas_survive_a_restart(broker):
    with WireClient(broker.port) as c:
        assert alter(c, ALL) == [(0, None)] * len(ALL)
        before = describe(c, [])
    broker.stop()
    broker.start()
    with WireClient(broker.port) as c:
        assert describe(c, []) == before


def _throttle_seconds(broker, kind: str, **labels) -> float:
    return scrape(broker.metrics_port).sum(
        "logflume_broker_quota_throttle_time_seconds_total", type=kind, **labels
    )


def test_a_producer_over_its_quota_is_throttled(broker):
    create_topic(broker.bootstrap, "quota-produce", partitions=1)
    with WireClient(broker.port) as c:
        assert alter(c, [(entity(client="slow-producer"), {"producer_byte_rate": 2048.0})]) == [
            (0, None)
        ]
    throttles = []
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "slow-producer",
            "linger.ms": 5,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    value = b"x" * 1000
    for _ in range(100):
        p.produce("quota-produce", value)
        p.poll(0)
        if throttles:
            break
        p.flush(30)
    assert p.flush(60) == 0
    p.poll(0)
    assert throttles and max(throttles) > 0
    seconds = _throttle_seconds(broker, "produce", client_id="slow-producer")
    assert seconds > 0
    rate = scrape(broker.metrics_port).get(
        "logflume_broker_quota_byte_rate", type="produce", user="", client_id="slow-producer"
    )
    assert rate is not None and rate > 0


def test_a_consumer_over_its_quota_is_throttled(broker):
    create_topic(broker.bootstrap, "quota-fetch", partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for _ in range(200):
        p.produce("quota-fetch", b"y" * 1000)
    assert p.flush(30) == 0
    with WireClient(broker.port) as c:
        # every consumer's own quota, from the user default (User:ANONYMOUS here)
        assert alter(c, [(entity(user=None), {"consumer_byte_rate": 4096.0})]) == [(0, None)]
    throttles = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "quota-group",
            "client.id": "slow-consumer",
            "auto.offset.reset": "earliest",
            "max.partition.fetch.bytes": 20000,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    consumer.subscribe(["quota-fetch"])
    try:
        wait_until(lambda: poll_once(consumer) and throttles, timeout=60, what="a throttle")
    finally:
        consumer.close()
    assert max(throttles) > 0
    # a user-level quota (here the users' default) is shared by all clients of the user
    assert _throttle_seconds(broker, "fetch", user="ANONYMOUS", client_id="") > 0


def poll_once(consumer) -> bool:
    """Consume what is there (errors fail the test); True."""
    for m in consumer.consume(100, 0.2):
        assert m.error() is None, m.error()
    return True


def test_throttled_answers_over_the_wire(broker):
    """Produce v9 answers at once with the throttle time (the client holds back),
    Produce v5 answers after it (as Kafka delays it for clients from before
    KIP-219); a throttled Fetch answers without partitions, its bytes taken back."""
    create_topic(broker.bootstrap, "quota-wire", partitions=1)
    value = b"w" * 10_500
    with WireClient(broker.port) as c:
        for client in ("new", "old", "reader"):
            ent = entity(client=client)
            key = "consumer_byte_rate" if client == "reader" else "producer_byte_rate"
            assert alter(c, [(ent, {key: 1000.0})]) == [(0, None)]
        produced = c.request(ApiKey.PRODUCE, 9, produce_body("quota-wire", batch(value)))
        assert produced["throttle_time_ms"] == 0  # wire-test has no quota
    for client_id, version in (("new", 9), ("old", 5)):
        with BlockingClient("127.0.0.1", broker.port, 30, client_id=client_id) as c:
            answer = c.request(ApiKey.PRODUCE, version, produce_body("quota-wire", batch(value)))
            part = answer["responses"][0]["partition_responses"][0]
            assert part["error_code"] == ErrorCode.NONE  # appended all the same
            assert 0 < answer["throttle_time_ms"] <= 11_000
    with BlockingClient("127.0.0.1", broker.port, 30, client_id="reader") as c:
        answer = c.request(ApiKey.FETCH, 11, fetch_body("quota-wire"))
    assert answer["throttle_time_ms"] > 0 and answer["responses"] == []
