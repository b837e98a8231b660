import pytest

from common.hostport import connect_address, parse_hostport


@pytest.mark.parametrize(
    "text, expected",
    [
        ("127.0.0.1:8285", ("127.0.0.1", 8285)),
        (":8285", ("0.0.0.0", 8285)),
        ("[::1]:9092", ("::1", 9092)),
        ("broker1:0", ("broker1", 0)),
        ("host:65535", ("host", 65535)),
    ],
)
def test_parse_hostport_accepts(text, expected):
    assert parse_hostport(text) == expected


@pytest.mark.parametrize("text", ["8285", "host:", "host:port", "host:65536", "host:-1", ""])
def test_parse_hostport_rejects_naming_the_key(text):
    with pytest.raises(ValueError, match=r"^sources\.udp\.listen: expected host:port"):
        parse_hostport(text, "sources.udp.listen")


def test_wildcard_binds_are_reached_on_loopback():
    assert connect_address("0.0.0.0", 9092) == ("127.0.0.1", 9092)
    assert connect_address("::", 9092) == ("127.0.0.1", 9092)
    assert connect_address("10.0.0.5", 9092) == ("10.0.0.5", 9092)
