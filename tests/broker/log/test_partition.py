import gc
import os

import pytest

from broker.log import (
    CorruptBatchError,
    InvalidOffsetError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
)
from broker.log.producer_state import ProducerStateError
from broker.protocol.errors import ErrorCode
from broker.protocol.records import BatchBuilder, Codec, iter_batches
from tests.broker.log.util import all_records, make_batch, read_all


class Clock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


@pytest.fixture
def clock():
    return Clock()


def open_log(tmp_path, clock=None, **cfg):
    return PartitionLog(tmp_path / "t-0", LogConfig(**cfg), clock=clock or Clock())


def test_append_assigns_offsets_and_epoch(tmp_path):
    log = open_log(tmp_path)
    assert (log.topic, log.partition) == ("t", 0)
    info = log.append(make_batch(3) + make_batch(2, ts=2000), leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.num_batches, info.max_timestamp) == (
        0,
        4,
        2,
        2000,
    )
    info = log.append(make_batch(1))
    assert info.first_offset == 5 and log.log_end_offset == 6
    batches = read_all(log)
    assert [(b.base_offset, b.partition_leader_epoch) for b in batches] == [(0, 5), (3, 5), (5, 0)]
    assert [r.offset for r in all_records(log)] == list(range(6))
    assert log.leader_epoch_cache.entries == [(5, 0)]


def test_read_returns_containing_batch_and_kip74(tmp_path):
    log = open_log(tmp_path)
    for _ in range(10):
        log.append(make_batch(10, size=100))  # ~1.1 KB each
    size = read_all(log)[0].size
    one = log.read(15, 10)  # max_bytes below one batch: first batch still whole
    (b,) = iter_batches(one.read_bytes())
    assert (b.base_offset, one.length) == (10, size)
    two = log.read(15, int(size * 2.5))
    assert [b.base_offset for b in iter_batches(two.read_bytes())] == [10, 20]
    everything = log.read(0, 1 << 20)
    assert everything.length == log.size_bytes
    assert log.read(100, 100) is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(101, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_max_offset_bound(tmp_path):
    log = open_log(tmp_path)
    for _ in range(5):
        log.append(make_batch(10))
    piece = log.read(0, 1 << 20, max_offset=25)
    assert [b.base_offset for b in iter_batches(piece.read_bytes())] == [0, 10, 20]
    assert [b.base_offset for b in log.read_batches(0, 1 << 20, max_offset=20)] == [0, 10]
    assert log.read(20, 1 << 20, max_offset=20) is None
    assert log.read(35, 1 << 20, max_offset=30) is None


def test_reads_stay_in_one_segment_and_index_is_used(tmp_path):
    log = open_log(tmp_path, segment_bytes=20_000, index_interval_bytes=500)
    for _ in range(100):
        log.append(make_batch(4, size=250))
    assert len(log.segments) > 3
    assert all(s.index.entries > 5 for s in log.segments[:-1])
    for offset in range(0, 400, 7):
        piece = log.read(offset, 1 << 20)
        batches = list(iter_batches(piece.read_bytes()))
        assert batches[0].base_offset <= offset <= batches[0].last_offset
        seg = [s for s in log.segments if s.file is piece.file][0]
        assert batches[-1].next_offset == seg.next_offset
    assert [r.offset for r in all_records(log)] == list(range(400))


@pytest.mark.parametrize("codec", list(Codec))
def test_offset_for_timestamp(tmp_path, codec):
    log = open_log(tmp_path, segment_bytes=3000, index_interval_bytes=100)
    for i in range(50):
        b = BatchBuilder(codec=codec)
        for j in range(3):
            b.append(os.urandom(50), timestamp_ms=10_000 + i * 10 + j)
        log.append(b.build())
    assert len(log.segments) > 3
    assert log.offset_for_timestamp(0) == (0, 10_000)
    assert log.offset_for_timestamp(10_001) == (1, 10_001)
    assert log.offset_for_timestamp(10_250) == (75, 10_250)
    assert log.offset_for_timestamp(10_253) == (78, 10_260)
    assert log.offset_for_timestamp(10_492) == (149, 10_492)
    assert log.offset_for_timestamp(10_493) is None


def test_roll_by_time_index_full_and_offset_overflow(tmp_path, clock):
    log = open_log(
        tmp_path, clock, segment_ms=1000, segment_index_bytes=8 * 3, index_interval_bytes=0
    )
    log.append(make_batch(1, ts=5000))
    log.append(make_batch(1, ts=5900))
    assert len(log.segments) == 1
    log.append(make_batch(1, ts=6001))  # more than segment.ms after the segment's first batch
    assert [s.base_offset for s in log.segments] == [0, 2]
    for _ in range(5):
        log.append(make_batch(1, ts=6001))
    assert len(log.segments) >= 3  # the 3-entry index filled up
    assert all(s.index.entries <= 3 for s in log.segments)
    far = bytearray(make_batch(1))
    far[0:8] = (log.log_end_offset + 2**31 + 10).to_bytes(8, "big")
    log.append_as_follower(bytes(far))
    assert log.active.base_offset == log.log_end_offset - 1
    assert log.read_batches(log.log_end_offset - 1, 100)[0].base_offset == log.log_end_offset - 1


def test_retention_by_time_and_size(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=2000, retention_ms=60_000)
    now_ms = int(clock() * 1000)
    for i in range(30):
        log.append(make_batch(2, ts=now_ms - 120_000 + i * 1000, size=200))
    n = len(log.segments)
    old_piece = log.read(0, 100)
    assert log.delete_old_segments() > 0
    assert 1 <= len(log.segments) < n
    assert log.log_start_offset == log.segments[0].base_offset > 0
    gc.collect()
    assert list(iter_batches(old_piece.read_bytes()))[0].base_offset == 0  # deleted, still readable
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    clock.t += 10_000
    while len(log.segments) > 1:
        assert log.delete_old_segments() > 0
    assert log.delete_old_segments() == 0  # never the active segment
    log.update_config(LogConfig(segment_bytes=2000, retention_ms=-1, retention_bytes=3000))
    for _ in range(40):
        log.append(make_batch(2, ts=now_ms, size=200))
    log.delete_old_segments()
    assert log.size_bytes - log.segments[0].size < 3000 <= log.size_bytes + 2000
    assert [r.offset for r in all_records(log)] == list(
        range(log.log_start_offset, log.log_end_offset)
    )


def test_retention_respects_max_offset(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=1000, retention_ms=0)
    for _ in range(10):
        log.append(make_batch(2, ts=0, size=300))
    assert log.delete_old_segments(max_offset=4) == 2
    assert log.log_start_offset == 4


def test_append_validation(tmp_path):
    log = open_log(tmp_path, max_message_bytes=500)
    with pytest.raises(RecordTooLargeError) as e:
        log.append(make_batch(1, size=600))
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    bad = bytearray(make_batch(1))
    bad[-1] ^= 1
    with pytest.raises(CorruptBatchError) as e:
        log.append(bad)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(CorruptBatchError):
        log.append(b"")
    assert log.log_end_offset == 0 and log.size_bytes == 0
    log.append_as_follower(bytes(make_batch(3)))
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(bytes(make_batch(1)))
    gap = bytearray(make_batch(1))
    gap[0:8] = (10).to_bytes(8, "big")
    log.append_as_follower(gap)
    assert log.log_end_offset == 11
    assert [b.base_offset for b in read_all(log)] == [0, 10]


def _with_count(batch: bytes, count: int) -> bytes:
    """`batch` claiming `count` records (CRC fixed, so only the count check can tell)."""
    import crc32c

    buf = bytearray(batch)
    buf[57:61] = count.to_bytes(4, "big")
    buf[17:21] = crc32c.crc32c(bytes(buf[21:])).to_bytes(4, "big")
    return bytes(buf)


def _idempotent(seq: int, n: int = 2, pid: int = 7, epoch: int = 0) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(b"v%d" % (seq + i), timestamp_ms=1000)
    return b.build()


# The two append shapes: one CreateTime batch is written from the caller's buffer;
# several batches, or LogAppendTime, are rewritten in a bytearray. One validation.
SHAPES = {
    "one-batch": {},
    "log-append-time": {"message_timestamp_type": "LogAppendTime"},
    "several": {},
}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_append_shape_validates_alike(tmp_path, clock, shape):
    log = open_log(tmp_path, clock, max_message_bytes=500, **SHAPES[shape])
    ok = make_batch(1)

    def append(batch):
        return log.append(ok + batch if shape == "several" else batch)

    cases = [
        (make_batch(1, size=600), ErrorCode.MESSAGE_TOO_LARGE),
        (_with_count(make_batch(3), 2), ErrorCode.CORRUPT_MESSAGE),
        (_with_count(make_batch(3), 4), ErrorCode.CORRUPT_MESSAGE),
        (ok[:-1], ErrorCode.CORRUPT_MESSAGE),
    ]
    for batch, code in cases:
        with pytest.raises((RecordTooLargeError, CorruptBatchError)) as e:
            append(batch)
        assert e.value.code == code, batch
    if shape == "several":
        with pytest.raises(CorruptBatchError, match="one per partition"):
            append(_idempotent(0))
    assert log.log_end_offset == 0 and log.size_bytes == 0
    assert read_all(log) == []


@pytest.mark.parametrize("shape", ["one-batch", "log-append-time"])
def test_every_append_shape_checks_producer_state_and_epoch(tmp_path, clock, shape):
    log = open_log(tmp_path, clock, **SHAPES[shape])
    log.append(make_batch(3))
    first = log.append(_idempotent(0), leader_epoch=2)
    assert (first.first_offset, first.last_offset) == (3, 4)
    retry = log.append(_idempotent(0), leader_epoch=2)
    assert (retry.first_offset, retry.last_offset, retry.size) == (3, 4, 0)
    with pytest.raises(ProducerStateError) as e:
        log.append(_idempotent(5), leader_epoch=2)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(_idempotent(0, epoch=1), leader_epoch=3).first_offset == 5
    with pytest.raises(ProducerStateError) as e:
        log.append(_idempotent(2, epoch=0), leader_epoch=3)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 7
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 3), (3, 5)]
    assert [(b.base_offset, b.partition_leader_epoch) for b in read_all(log)] == [
        (0, 0),
        (3, 2),
        (5, 3),
    ]


def test_log_append_time(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    info = log.append(make_batch(2, ts=5))
    assert info.log_append_time == int(clock() * 1000) == info.max_timestamp
    assert [r.timestamp for r in all_records(log)] == [info.log_append_time] * 2


def test_truncate_to(tmp_path):
    log = open_log(tmp_path, segment_bytes=1500)
    for _ in range(20):
        log.append(make_batch(5, size=100))
    log.leader_epoch_cache.assign(3, 50)
    log.truncate_to(52)  # mid-batch: the whole batch [50, 54] goes
    assert log.log_end_offset == 50
    assert log.leader_epoch_cache.entries == [(0, 0)]
    assert [r.offset for r in all_records(log)] == list(range(50))
    log.append(make_batch(2))
    assert [r.offset for r in all_records(log)][-3:] == [49, 50, 51]
    log.truncate_to(20)
    assert log.log_end_offset == 20 and log.active.next_offset == 20
    assert log.size_bytes == sum(s.size for s in log.segments)
    for _ in range(10):
        log.append(make_batch(5, size=100))
    assert [r.offset for r in all_records(log)] == list(range(70))
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (1000, 1000, 0)
    assert log.append(make_batch(1)).first_offset == 1000
    log.close()
    reopened = PartitionLog(tmp_path / "t-0", LogConfig(), recovery_point=0)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (1000, 1001)
    reopened.close()


def test_flush_messages_and_roll_advance_recovery_point(tmp_path):
    log = open_log(tmp_path, flush_messages=5, segment_bytes=1000)
    log.append(make_batch(3))
    assert log.recovery_point == 0
    log.append(make_batch(3))
    assert log.recovery_point == 6
    for _ in range(5):
        log.append(make_batch(1, size=400))
    log.local_log.reap_flushes(wait=True)
    assert log.recovery_point >= log.active.base_offset > 6
    log.flush()
    assert log.recovery_point == log.log_end_offset


def test_compressed_batches_are_stored_as_is(tmp_path):
    log = open_log(tmp_path)
    raw = [make_batch(5, codec=c) for c in Codec]
    for r in raw:
        log.append(r)
    stored = read_all(log)
    assert [bytes(b.raw())[16:] for b in stored] == [r[16:] for r in raw]
    assert [r.offset for r in all_records(log)] == list(range(25))


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("shape", ["one batch", "two batches", "idempotent"])
def test_compression_type_recompresses_what_the_producer_sent(tmp_path, clock, target, shape):
    """As Kafka: a topic whose compression.type names a codec stores every batch in
    that codec, whatever the producer used; offsets, keys, values, headers,
    timestamps and producer fields are kept."""
    log = open_log(tmp_path, clock, compression_type=target)
    want = Codec.NONE if target == "uncompressed" else Codec[target.upper()]
    producer = (42, 3, 7) if shape == "idempotent" else (-1, -1, -1)
    sent = []
    for codec in (Codec.LZ4, want):
        b = BatchBuilder(
            codec=codec, producer_id=producer[0], producer_epoch=producer[1], base_sequence=-1
        )
        for i in range(3):
            b.append(b"v%d" % i, key=b"k%d" % i, timestamp_ms=5000 + i, headers=[("h", b"%d" % i)])
        sent.append(b)
    if shape == "two batches":
        log.append(sent[0].build() + sent[1].build())
    else:
        for seq, b in enumerate(sent):
            if shape == "idempotent":
                b.base_sequence = seq * 3
            log.append(b.build())
    stored = read_all(log)
    assert [b.codec for b in stored] == [want, want]
    assert [(b.base_offset, b.last_offset, b.producer_id) for b in stored] == [
        (0, 2, producer[0]),
        (3, 5, producer[0]),
    ]
    records = all_records(log)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (o, b"k%d" % (o % 3), b"v%d" % (o % 3), 5000 + o % 3, [("h", b"%d" % (o % 3))])
        for o in range(6)
    ]
    if shape == "idempotent":  # a retry of the recompressed batch is a duplicate
        assert log.append(sent[1].build()).first_offset == 3
        assert log.log_end_offset == 6


def test_delete(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(1))
    log.delete()
    assert not os.path.exists(tmp_path / "t-0")
