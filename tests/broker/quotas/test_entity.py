"""Client quota entities (broker.quotas.entity): Kafka's precedence, the describe
filters' matching, and the checks on what an alteration sets. Pure code."""

import pytest

from broker.quotas.entity import (
    DEFAULT,
    Entity,
    QuotaError,
    apply_ops,
    check_value,
    matches,
    parse_entity,
    parse_filter,
    resolve,
)


def test_precedence_from_the_exact_pair_down_to_the_client_default():
    levels = [
        (Entity("u", "c"), ("u", "c")),
        (Entity("u", DEFAULT), ("u", "c")),
        (Entity("u", None), ("u", "")),
        (Entity(DEFAULT, "c"), ("u", "c")),
        (Entity(DEFAULT, DEFAULT), ("u", "c")),
        (Entity(DEFAULT, None), ("u", "")),
        (Entity(None, "c"), ("", "c")),
        (Entity(None, DEFAULT), ("", "c")),
    ]
    quotas = {entity: {"producer_byte_rate": float(i)} for i, (entity, _) in enumerate(levels)}
    for i, (entity, tags) in enumerate(levels):
        assert resolve(quotas, "producer_byte_rate", "u", "c") == (float(i), tags)
        del quotas[entity]
    assert resolve(quotas, "producer_byte_rate", "u", "c") is None


def test_each_key_resolves_on_its_own():
    quotas = {
        Entity("u", None): {"consumer_byte_rate": 5.0},
        Entity(None, "c"): {"producer_byte_rate": 7.0},
    }
    assert resolve(quotas, "producer_byte_rate", "u", "c") == (7.0, ("", "c"))
    assert resolve(quotas, "consumer_byte_rate", "u", "c") == (5.0, ("u", ""))


def test_values_are_checked_as_kafka_checks_them():
    assert check_value("producer_byte_rate", 1024.0000001) == 1024.0
    assert check_value("request_percentage", 12.5) == 12.5
    for key, value in (
        ("producer_byte_rate", 10.5),
        ("producer_byte_rate", 1e300),  # not a long
        ("producer_byte_rate", -1.0),
        ("consumer_byte_rate", 0.0),
        ("request_percentage", float("nan")),
        ("not_a_quota", 1.0),
    ):
        with pytest.raises(QuotaError):
            check_value(key, value)
    ops = [
        {"key": "producer_byte_rate", "value": 0.0, "remove": True},
        {"key": "unknown", "value": 0.0, "remove": True},  # a no-op, as in Kafka
        {"key": "consumer_byte_rate", "value": 9.0, "remove": False},
    ]
    assert apply_ops({"producer_byte_rate": 1.0}, ops) == {"consumer_byte_rate": 9.0}


def test_entities_kafka_refuses():
    assert parse_entity([{"entity_type": "user", "entity_name": None}]) == Entity(DEFAULT, None)
    for bad in (
        [],
        [{"entity_type": "", "entity_name": "x"}],
        [{"entity_type": "client-id", "entity_name": ""}],
        [{"entity_type": "user", "entity_name": "a"}, {"entity_type": "user", "entity_name": "b"}],
    ):
        with pytest.raises(QuotaError) as e:
            parse_entity(bad)
        assert not e.value.unsupported
    with pytest.raises(QuotaError) as e:
        parse_entity([{"entity_type": "ip", "entity_name": None}])
    assert e.value.unsupported


def _filter(*components):
    return parse_filter([{"entity_type": t, "match_type": m, "match": n} for t, m, n in components])


def test_filters_match_as_zookeeper_mode_matches():
    alice, alice_app = Entity("alice", None), Entity("alice", "app")
    default_user, app = Entity(DEFAULT, None), Entity(None, "app")
    exact = _filter(("user", 0, "alice"))
    assert [matches(exact, e, False) for e in (alice, alice_app, default_user, app)] == [
        True, True, False, False,
    ]  # fmt: skip
    assert [matches(exact, e, True) for e in (alice, alice_app)] == [True, False]
    default = _filter(("user", 1, None))
    assert matches(default, default_user, True) and not matches(default, alice, True)
    specified = _filter(("user", 2, None))
    assert matches(specified, default_user, True) and matches(specified, alice, True)
    assert not matches(specified, app, False)
    nothing = _filter()
    assert all(matches(nothing, e, False) for e in (alice, app, default_user))
    assert not any(matches(nothing, e, True) for e in (alice, app, default_user))
