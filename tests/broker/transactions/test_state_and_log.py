"""The transaction state table and `__transaction_state` records: Kafka's state ids
and transitions, value encoding byte for byte, round trips, partition placement."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.groups.offsets_topic import partition_for as group_partition
from broker.transactions.log_format import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
    value_version,
)
from broker.transactions.state import VALID_PREVIOUS, IllegalTransition, TxnMetadata, TxnState

S = TxnState


def test_state_ids_and_names_are_kafkas():
    assert [(s.value, s.display) for s in S] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transitions_follow_the_table(source, target):
    meta = TxnMetadata("t", 1, 0, 1000, state=source)
    if source in VALID_PREVIOUS[target]:
        meta.transition(target)
        assert meta.state == target
    else:
        with pytest.raises(IllegalTransition):
            meta.transition(target)


def test_commit_path_is_allowed_and_skipping_prepare_is_not():
    meta = TxnMetadata("t", 1, 0, 1000)
    for s in (S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING):
        meta.transition(s)
    with pytest.raises(IllegalTransition):
        meta.transition(S.COMPLETE_ABORT)


def test_value_bytes_match_kafkas_layout():
    meta = TxnMetadata("t", 5, 1, 60000, S.ONGOING, {("a", 3), ("a", 0)}, 10, 20)
    assert encode_key("t") == bytes.fromhex("0000 0001") + b"t"
    assert (
        encode_value(meta)
        == bytes.fromhex(
            "0000"  # value version 0
            "0000000000000005 0001 0000ea60 01"  # producer id, epoch, timeout, Ongoing
            "00000001 0001" + b"a".hex() + "00000002 00000000 00000003"  # a: [0, 3]
            "0000000000000014 000000000000000a"  # last update 20, start 10
        )
    )


def test_empty_state_has_null_partitions():
    meta = TxnMetadata("t", 5, 1, 60000)
    raw = encode_value(meta)
    assert raw[2 + 8 + 2 + 4 + 1 :][:4] == b"\xff\xff\xff\xff"
    assert decode_value("t", raw).partitions == set()


def test_flexible_value_version_1_is_read():
    raw = bytes.fromhex(
        "0001"
        "0000000000000005 0001 0000ea60 02"
        "02 02" + b"a".hex() + "02 00000007 00"  # compact: one topic, one partition
        "0000000000000014 000000000000000a 00"
    )
    meta = decode_value("t", raw)
    assert meta.state == S.PREPARE_COMMIT and meta.partitions == {("a", 7)}


def test_value_version_1_carries_the_transactions_v2_tags():
    """Written when transaction.version >= 1: PreviousProducerId (tag 0),
    NextProducerId (tag 1) and ClientTransactionVersion (tag 2), each only when it
    differs from its default, as Kafka's generated code writes tagged fields."""
    assert value_version(0) == 0 and value_version(1) == value_version(2) == 1
    meta = TxnMetadata(
        "t", 5, 32767, 60000, S.PREPARE_COMMIT, {("a", 7)}, 10, 20, next_producer_id=9
    )
    meta.client_tv = 2
    raw = encode_value(meta, 1)
    assert raw == bytes.fromhex(
        "0001"
        "0000000000000005 7fff 0000ea60 02"
        "02 02" + b"a".hex() + "02 00000007 00"
        "0000000000000014 000000000000000a"
        "02 01 08 0000000000000009 02 02 0002"  # NextProducerId 9, ClientTransactionVersion 2
    )
    assert decode_value("t", raw) == meta
    plain = TxnMetadata("t", 5, 1, 60000, S.EMPTY)
    assert encode_value(plain, 1)[-1:] == b"\x00"  # every tag at its default: none written
    assert decode_value("t", encode_value(plain, 1)) == plain


states = st.sampled_from([s for s in S if s not in (S.PREPARE_EPOCH_FENCE,)])
partitions = st.sets(st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 1000)), max_size=6)


@given(
    st.text(min_size=1, max_size=20),
    st.integers(0, 2**63 - 1),
    st.integers(0, 32767),
    st.integers(1, 2**31 - 1),
    states,
    partitions,
    st.integers(-1, 2**40),
)
def test_round_trip(tid, pid, epoch, timeout, state, parts, ts):
    if state == S.EMPTY:
        parts = set()
    meta = TxnMetadata(tid, pid, epoch, timeout, state, set(parts), ts, ts + 1)
    assert decode_key(encode_key(tid)) == tid
    assert decode_value(tid, encode_value(meta)) == meta
    meta.last_producer_id, meta.next_producer_id, meta.client_tv = pid // 2, ts, 2
    assert decode_value(tid, encode_value(meta, 1)) == meta


@given(st.text(max_size=30))
def test_placement_is_the_group_formula(tid):
    assert partition_for(tid, 50) == group_partition(tid, 50)
