"""Pure helpers of bench/bench_scale.py and bench/scale_clients.py (no broker here)."""

import socket
import struct

import pytest

from bench.bench_broker import record_pool
from bench.bench_scale import (
    batches_per_partition,
    group_settled,
    parse_status,
    per_connection_kib,
)
from bench.scale_clients import (
    Frame,
    LoadTally,
    Wire,
    _build_batch,
    partition_layout,
    pool_batches,
    produce_frames,
)
from broker.protocol import ApiKey, decode_request
from broker.protocol.records import CREATE_TIME, RecordBatch
from common.compression import Codec

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


def test_pool_batches_are_distinct_lz4_batches_of_the_pool_lines():
    pool = record_pool()
    batches = pool_batches(5000, 4, Codec.LZ4)
    assert len(set(batches)) == 4
    for i, raw in enumerate(batches):
        b = RecordBatch(raw)
        b.validate()
        assert b.codec == Codec.LZ4 and b.records_count == 5000
        assert b.producer_id == -1 and b.base_sequence == -1 and b.timestamp_type == CREATE_TIME
        values = [r.value for r in b.records()]
        assert values == [pool[(i * 1024 + j) % len(pool)] for j in range(5000)]


def test_produce_frames_put_every_batch_on_every_partition_in_turn():
    batches = pool_batches(10, 4, Codec.LZ4)
    layout = [("bench", p) for p in range(6)]
    frames = produce_frames(layout, batches, per_request=6)
    assert len(frames) == 4  # 4 rounds of 6 partitions, 6 a request
    seen = []
    for frame in frames:
        header, body = decode_request(memoryview(frame.data)[4:])
        assert (header.api_key, header.api_version) == (ApiKey.PRODUCE, 8)
        assert body["acks"] == 1 and body["transactional_id"] is None
        [topic] = body["topic_data"]
        parts = topic["partition_data"]
        assert [p["index"] for p in parts] == list(range(6))
        assert frame.records == {("bench", p): 10 for p in range(6)}
        seen += [bytes(p["records"]) for p in parts]
    assert seen == [batches[k % 4] for k in range(24)]


def test_produce_frames_of_one_batch_are_one_round():
    layout = partition_layout(40, 2)
    frames = produce_frames(layout, [_build_batch(4096, 1000)], per_request=16)
    assert [len(f.records) for f in frames] == [16, 16, 8]


def test_load_tally_counts_acknowledged_records_and_partition_errors():
    frame = Frame(b"", {("t", 0): 10, ("t", 1): 20}, {("t", 0): 100, ("t", 1): 200})
    tally = LoadTally()
    ok = {"index": 0, "error_code": 0}
    tally.add(frame, {"responses": [{"name": "t", "partition_responses": [ok, ok | {"index": 1}]}]})
    bad = {"index": 1, "error_code": 6}
    tally.add(frame, {"responses": [{"name": "t", "partition_responses": [ok, bad]}]})
    assert (tally.requests, tally.records, tally.bytes) == (2, 40, 400)
    assert tally.errors == {6: 1}


def test_send_frame_patches_the_correlation_id_and_leaves_the_frame_alone():
    frame = struct.pack(">ihhi", 9, 0, 8, 0) + b"abcde"
    wire = Wire.__new__(Wire)
    wire.sock, peer = socket.socketpair()
    wire.corr = 0
    try:
        assert wire.send_frame(frame) == 1
        assert wire.send_frame(frame) == 2
        got = peer.recv(100)
        while len(got) < 2 * len(frame):
            got += peer.recv(100)
    finally:
        wire.sock.close()
        peer.close()
    assert (
        got
        == frame[:8] + struct.pack(">i", 1) + b"abcde" + frame[:8] + struct.pack(">i", 2) + b"abcde"
    )
    assert frame[8:12] == b"\0\0\0\0"
