"""`anonymize_ip` interceptor: client addresses truncated (IPv4 /24, IPv6 /48) or
replaced by a keyed hash; what is no address is left as is and counted."""

import hashlib
import hmac
import socket

import pytest

from agent.api import Event
from agent.interceptors.anonymize_ip import AnonymizeIp, truncate
from tests.agent.interceptors.pipelines import FIRST_LINE, WHERE, compile_interceptor
from tests.sources.harness import FakeMetrics, make_context

DONE = "logflume_agent_ip_anonymized_total"
BAD = "logflume_agent_ip_unparsable_total"
SALT = "0123456789abcdef-salt"


def anonymizer(metrics=None, **config) -> AnonymizeIp:
    return AnonymizeIp(AnonymizeIp.Config(**config), make_context("/nonexistent", "ip", metrics))


def one(value, **config):
    e = Event(b"line", record={"client": value, "status": 200})
    anonymizer(**config).intercept([e])
    return e.record["client"]


@pytest.mark.parametrize(
    ("address", "truncated"),
    [
        ("203.0.113.57", "203.0.113.0"),
        ("203.0.113.0", "203.0.113.0"),
        ("255.255.255.255", "255.255.255.0"),
        ("10.1.2.3", "10.1.2.0"),
        # IPv6: the first 48 bits kept, the last 80 zeroed
        ("2001:db8:85a3:8d3:1319:8a2e:370:7348", "2001:db8:85a3::"),
        ("2001:DB8:85A3:FFFF:1::1", "2001:db8:85a3::"),
        ("2001:db8::1", "2001:db8::"),
        ("::1", "::"),
        ("fe80::1%eth0", "fe80::"),
        # an IPv4 client on a dual-stack socket: its IPv4 part truncated as IPv4
        ("::ffff:203.0.113.57", "::ffff:203.0.113.0"),
        ("::FFFF:cb00:7139", "::ffff:203.0.113.0"),
    ],
)
def test_truncate_keeps_the_network_and_zeroes_the_host(address, truncated):
    assert truncate(address) == truncated
    assert one(address) == truncated


@pytest.mark.parametrize(
    "value",
    ["unix:", "203.0.113", "203.0.113.256", "203.0.113.57, 10.0.0.1", " 203.0.113.57", "", "-"],
)
def test_what_is_no_address_is_none(value):
    assert truncate(value) is None


def test_unparsable_values_are_left_as_they_are_and_counted():
    metrics = FakeMetrics()
    a = anonymizer(metrics)
    values = ["unix:", "203.0.113.57, 10.0.0.1", 42, "198.51.100.7", None]
    events = [Event(b"", record={"client": v}) for v in values]
    events += [Event(b"", record={"status": 200}), Event(b"raw 198.51.100.7")]
    out = a.intercept(events)
    assert out == events
    assert [e.record["client"] for e in events[:5]] == [
        "unix:",
        "203.0.113.57, 10.0.0.1",
        42,
        "198.51.100.0",
        None,
    ]
    # no address to anonymise (null, no such field, no record): not counted at all
    assert events[5].record == {"status": 200}
    assert events[6].record is None and events[6].body == b"raw 198.51.100.7"
    assert metrics.value(DONE, component="ip") == 1
    assert metrics.value(BAD, component="ip") == 3


def test_the_same_address_again_costs_a_lookup_and_gives_the_same_result():
    metrics = FakeMetrics()
    a = anonymizer(metrics)
    batch = [Event(b"", record={"client": "203.0.113.57"}) for _ in range(3)]
    batch.append(Event(b"", record={"client": "unix:"}))
    a.intercept(batch)
    again = [Event(b"", record={"client": "203.0.113.57"}), Event(b"", record={"client": "unix:"})]
    a.intercept(again)
    assert [e.record["client"] for e in batch + again] == ["203.0.113.0"] * 3 + [
        "unix:",
        "203.0.113.0",
        "unix:",
    ]
    assert (metrics.value(DONE), metrics.value(BAD)) == (4, 2)


def test_another_field():
    e = Event(b"", record={"client": "10.0.0.1", "x_forwarded_for": "2001:db8:1:2::5"})
    anonymizer(field="x_forwarded_for").intercept([e])
    assert e.record == {"client": "10.0.0.1", "x_forwarded_for": "2001:db8:1::"}


def expected_hash(salt: str, packed: bytes) -> str:
    return hmac.new(salt.encode(), packed, hashlib.sha256).hexdigest()[:16]


def test_hash_is_hmac_sha256_of_the_address_bytes_keyed_by_the_salt_16_hex_digits():
    v4 = socket.inet_pton(socket.AF_INET, "203.0.113.57")
    v6 = socket.inet_pton(socket.AF_INET6, "2001:db8::1")
    assert one("203.0.113.57", mode="hash", salt=SALT) == expected_hash(SALT, v4)
    assert one("2001:db8::1", mode="hash", salt=SALT) == expected_hash(SALT, v6)
    # one address, one digest, however it is written
    assert one("2001:DB8:0::1", mode="hash", salt=SALT) == expected_hash(SALT, v6)
    assert one("::ffff:203.0.113.57", mode="hash", salt=SALT) == expected_hash(SALT, v4)
    digest = one("203.0.113.57", mode="hash", salt=SALT)
    assert len(digest) == 16 and int(digest, 16) >= 0
    # another salt, another digest; no address, no digest
    assert one("203.0.113.57", mode="hash", salt=SALT + "2") != digest
    assert one("unix:", mode="hash", salt=SALT) == "unix:"


def test_validate():
    def check(**config):
        return AnonymizeIp.validate(AnonymizeIp.Config(**config))

    assert check() == []
    assert check(mode="hash", salt=SALT) == []
    assert check(mode="hash") == [
        "salt: required with mode: hash (a secret of at least 16 characters)"
    ]
    assert check(mode="hash", salt="short") == [
        "salt: too short (5 characters): a secret of at least 16 characters"
    ]
    assert check(salt=SALT) == ["salt: only used with mode: hash"]
    assert check(field="") == ["field: empty"]


def test_the_salt_comes_from_a_file_or_the_environment(tmp_path):
    secret = tmp_path / "ip-salt"
    secret.write_text(SALT + "\n")
    config, errors = compile_interceptor(
        f'type: anonymize_ip\nmode: hash\nsalt: "${{file:{secret}}}"'
    )
    assert errors == [] and config.salt == SALT  # less the trailing newline
    assert SALT not in repr(config)  # never logged
    config, errors = compile_interceptor(
        "type: anonymize_ip\nmode: hash\nsalt: ${IP_SALT}", environ={"IP_SALT": SALT}
    )
    assert errors == [] and config.salt == SALT


def test_errors_name_file_line_and_key(tmp_path):
    _, errors = compile_interceptor("type: anonymize_ip\nmode: hash")
    assert errors == [
        f"pipelines.yaml:{FIRST_LINE}:13: {WHERE}.salt: "
        "required with mode: hash (a secret of at least 16 characters)"
    ]
    _, errors = compile_interceptor("type: anonymize_ip\nmode: hash\nsalt: tiny")
    assert errors == [
        f"pipelines.yaml:{FIRST_LINE + 2}:19: {WHERE}.salt: "
        "too short (4 characters): a secret of at least 16 characters"
    ]
    _, errors = compile_interceptor(
        f"type: anonymize_ip\nmode: hash\nsalt: ${{file:{tmp_path}/no}}"
    )
    assert len(errors) == 1 and errors[0].startswith(
        f"pipelines.yaml:{FIRST_LINE + 2}:19: {WHERE}.salt: cannot read {tmp_path}/no"
    )
    _, errors = compile_interceptor("type: anonymize_ip\nmode: mask")
    assert errors == [
        f"pipelines.yaml:{FIRST_LINE + 1}:19: {WHERE}.mode: "
        "expected 'truncate' | 'hash', got 'mask'"
    ]
