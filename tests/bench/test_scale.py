"""Pure helpers of bench/bench_scale.py and bench/scale_clients.py (no broker here)."""

import pytest

from bench.bench_scale import (
    batches_per_partition,
    group_settled,
    parse_status,
    per_connection_kib,
)
from bench.scale_clients import _build_batch, partition_layout
from broker.protocol.records import RecordBatch

STATUS = """Name:\tpython
VmPeak:\t  500000 kB
VmRSS:\t   41234 kB
RssAnon:\t   26000 kB
RssFile:\t   15234 kB
RssShmem:\t       0 kB
Threads:\t3
"""


def test_parse_status_keeps_the_kb_fields():
    s = parse_status(STATUS)
    assert s["VmRSS"] == 41234
    assert s["RssAnon"] + s["RssFile"] + s["RssShmem"] == s["VmRSS"]
    assert "Threads" not in s and "Name" not in s


def test_batches_per_partition_rounds_up():
    assert batches_per_partition(10 * 2**30, 1000, 65536) == 164
    assert batches_per_partition(1, 1000, 65536) == 1
    with pytest.raises(ValueError):
        batches_per_partition(1, 0, 65536)


def test_partition_layout_spreads_partitions_over_topics():
    layout = partition_layout(1000, 10)
    assert len(layout) == len(set(layout)) == 1000
    assert {t for t, _ in layout} == {f"scale-{i}" for i in range(10)}
    uneven = partition_layout(7, 3)
    assert [sum(t == f"scale-{i}" for t, _ in uneven) for i in range(3)] == [3, 2, 2]
    with pytest.raises(ValueError):
        partition_layout(2, 3)


def test_group_settled():
    members = {"0", "1", "2"}
    owned = {"0": frozenset({0, 1}), "1": frozenset({2, 3}), "2": frozenset({4, 5})}
    assert group_settled(owned, members, 6)
    assert not group_settled(owned | {"2": frozenset()}, members, 6)  # revoked
    assert not group_settled(owned | {"2": frozenset({3, 4, 5})}, members, 6)  # overlap
    assert not group_settled(owned, members | {"3"}, 6)  # a member owns nothing
    assert group_settled({"1": frozenset({0, 1, 2}), "2": frozenset({3, 4, 5})}, {"1", "2"}, 6)


def test_per_connection_kib():
    assert per_connection_kib(40_000, 42_500, 1000) == 2.5
    assert per_connection_kib(40_000, 40_000, 0) == 0


def test_build_batch_is_a_valid_batch_near_the_requested_size():
    raw = _build_batch(64 * 1024, 1000)
    b = RecordBatch(raw)
    b.validate()
    assert b.size == len(raw) <= 64 * 1024
    assert b.records_count == 64
    assert all(len(r.value) == 1000 for r in b.records())
