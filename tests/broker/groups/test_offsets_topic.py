import struct

import pytest

from broker.groups.offsets_topic import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    UnknownRecordVersion,
    build_batch,
    decode_group_value,
    decode_key,
    decode_offset_value,
    decode_record,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hashcode,
    partition_for,
)
from broker.groups.storage import records_in


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # the classic Integer.MIN_VALUE string
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # UTF-16 surrogate pair
    ],
)
def test_java_string_hashcode(text, expected):
    assert java_string_hashcode(text) == expected


def test_partition_for():
    assert partition_for("abc") == 96354 % 50
    assert partition_for("polygenelubricants") == 0
    assert partition_for("hello", 7) == 99162322 % 7
    # A negative hash: abs() before the modulo, as Kafka's Utils.abs.
    h = java_string_hashcode("console-consumer-1")
    assert partition_for("console-consumer-1") == abs(h) % 50


def test_offset_key_bytes_match_kafka_layout():
    raw = encode_offset_key(OffsetKey("g", "t", 3))
    assert raw == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(raw) == OffsetKey("g", "t", 3)
    assert encode_group_key(GroupKey("g")) == b"\x00\x02\x00\x01g"
    assert decode_key(encode_group_key(GroupKey("g"))) == GroupKey("g")
    with pytest.raises(UnknownRecordVersion):
        decode_key(b"\x00\x07\x00\x01g")


def test_offset_value_round_trip_and_old_versions():
    v = OffsetValue(42, "meta", 1700, leader_epoch=5)
    raw = encode_offset_value(v)
    assert raw[:2] == b"\x00\x03"
    assert decode_offset_value(raw) == v
    v0 = b"\x00\x00" + struct.pack(">q", 7) + b"\x00\x02md" + struct.pack(">q", 99)
    assert decode_offset_value(v0) == OffsetValue(7, "md", 99)
    v1 = b"\x00\x01" + struct.pack(">q", 7) + b"\x00\x00" + struct.pack(">qq", 99, 500)
    assert decode_offset_value(v1) == OffsetValue(7, "", 99, expire_timestamp=500)


def test_group_value_round_trip():
    value = GroupValue(
        "consumer",
        4,
        "range",
        "m-1",
        1234,
        (
            MemberRecord("m-1", "inst", "c1", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
            MemberRecord("m-2", None, "c2", "/127.0.0.2", 20000, 6000, b"", b""),
        ),
    )
    assert decode_group_value(encode_group_value(value)) == value
    empty = GroupValue("consumer", 5, None, None, 99, ())
    assert decode_group_value(encode_group_value(empty)) == empty


def test_group_value_v0_has_no_rebalance_timeout():
    raw = (
        b"\x00\x00"
        + b"\x00\x08consumer"
        + struct.pack(">i", 2)
        + b"\x00\x05range"
        + b"\x00\x01m"
        + struct.pack(">i", 1)
        + b"\x00\x01m\x00\x01c\x00\x01h"
        + struct.pack(">i", 7000)
        + struct.pack(">i", 1)
        + b"s"
        + struct.pack(">i", 1)
        + b"a"
    )
    v = decode_group_value(raw)
    assert v.generation == 2 and v.current_state_timestamp == -1
    assert v.members == (MemberRecord("m", None, "c", "h", 7000, 7000, b"s", b"a"),)


def test_batch_round_trip_with_tombstone():
    k1 = encode_offset_key(OffsetKey("g", "t", 0))
    k2 = encode_group_key(GroupKey("g"))
    batch = build_batch([(k1, encode_offset_value(OffsetValue(1, "", 5))), (k2, None)], 5)
    records = list(records_in(batch))
    assert [decode_record(k, v) for k, v in records] == [
        (OffsetKey("g", "t", 0), OffsetValue(1, "", 5)),
        (GroupKey("g"), None),
    ]
