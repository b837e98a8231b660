from dataclasses import replace

import pytest

from broker.log import LogConfig, LogManager, PartitionLog
from broker.log.manager import CLEANER_FILE
from broker.protocol.records import BatchBuilder, Codec
from tests.broker.log.util import all_records, read_all

DAY_MS = 86_400_000


class Clock:
    def __init__(self):
        self.t = 1_000_000.0

    def __call__(self):
        return self.t


def keyed(pairs, ts, codec=Codec.NONE) -> bytes:
    b = BatchBuilder(codec=codec)
    for k, v in pairs:
        b.append(v, key=k, timestamp_ms=ts)
    return b.build()


def compacted_log(tmp_path, clock, **kw):
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=600, **kw)
    return PartitionLog(tmp_path / "__consumer_offsets-0", cfg, clock=clock)


def test_keeps_latest_per_key_with_original_offsets(tmp_path):
    clock = Clock()
    log = compacted_log(tmp_path, clock)
    now = int(clock() * 1000)
    expected = {}
    for i in range(40):
        pairs = [(b"k%d" % ((i * 3 + j) % 7), b"v%d-%d" % (i, j)) for j in range(3)]
        info = log.append(keyed(pairs, now, Codec.LZ4 if i % 2 else Codec.NONE))
        for j, (k, _) in enumerate(pairs):
            expected[k] = info.first_offset + j
    # A keyless record is refused on a compacted topic, but one written while the
    # topic was cleanup.policy=delete stays and must survive cleaning.
    compact_config = log.config
    log.update_config(replace(compact_config, cleanup_policy="delete"))
    log.append(keyed([(None, b"no key")], now))
    log.update_config(compact_config)
    before_end = log.log_end_offset
    active_base = log.active.base_offset
    size_before = log.size_bytes
    log.compact()
    records = all_records(log)
    closed = [r for r in records if r.offset < active_base]
    # every keyed record in the closed segments is the latest for its key
    for r in closed:
        if r.key is not None:
            assert expected[r.key] == r.offset or r.offset >= active_base
    assert [r.offset for r in records] == sorted(r.offset for r in records)
    assert {r.key: r.offset for r in records if r.key is not None} == expected
    assert any(r.key is None for r in records)
    assert log.log_end_offset == before_end and log.log_start_offset == 0
    assert log.size_bytes < size_before
    assert log.cleaner_state.checkpoint == active_base
    for r in records:  # offset lookups still land on the right record
        batch = log.read_batches(r.offset, 1)[0]
        assert batch.base_offset <= r.offset <= batch.last_offset


@pytest.mark.parametrize("codec", list(Codec))
def test_tombstones_expire_after_delete_retention(tmp_path, codec):
    clock = Clock()
    log = compacted_log(tmp_path, clock, delete_retention_ms=DAY_MS)
    now = int(clock() * 1000)
    log.append(keyed([(b"a", b"1"), (b"b", b"1")], now, codec))
    log.append(keyed([(b"a", None)], now, codec))
    log.append(keyed([(b"c", b"x" * 700)], now))  # forces a roll
    log.append(keyed([(b"d", b"x" * 700)], now))
    log.compact()
    assert [(r.key, r.value) for r in all_records(log)][:2] == [(b"b", b"1"), (b"a", None)]
    clock.t += DAY_MS / 1000 + 10
    log.compact()  # no new dirty data, but the tombstone deadline has passed
    assert [r.key for r in all_records(log)] == [b"b", b"c", b"d"]
    assert [r.offset for r in all_records(log)] == [1, 3, 4]


def test_min_compaction_lag_and_active_segment_untouched(tmp_path):
    clock = Clock()
    log = compacted_log(tmp_path, clock, min_compaction_lag_ms=60_000)
    now = int(clock() * 1000)
    for i in range(10):
        log.append(keyed([(b"k", b"%d" % i * 100)], now))
    log.compact()
    assert len(all_records(log)) == 10  # too young
    clock.t += 120
    log.compact()
    records = all_records(log)
    assert [r.offset for r in records][-1] == 9
    assert len([r for r in records if r.offset < log.active.base_offset]) <= 1


def test_manager_checkpoints_cleaner_and_survives_restart(tmp_path):
    clock = Clock()
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=300)
    manager = LogManager(tmp_path / "data", LogConfig(), clock, topic_config=lambda t: cfg)
    log = manager.create("offsets", 0, cfg)
    now = int(clock() * 1000)
    for i in range(20):
        log.append(keyed([(b"k%d" % (i % 3), b"v" * 100)], now))
    manager.run_cleaner()
    assert (tmp_path / "data" / CLEANER_FILE).read_text().splitlines()[
        2
    ] == f"offsets 0 {log.cleaner_state.checkpoint}"
    offsets = [r.offset for r in all_records(log)]
    manager.close()
    manager = LogManager(tmp_path / "data", LogConfig(), clock, topic_config=lambda t: cfg)
    log = manager.get("offsets", 0)
    assert log.cleaner_state.checkpoint > 0
    assert [r.offset for r in all_records(log)] == offsets
    assert all(b.base_offset >= 0 for b in read_all(log))
    manager.close()


def test_the_cleaner_state_follows_the_log_ends(tmp_path):
    """Truncation makes what follows dirty again; a new log start is never dirty."""
    clock = Clock()
    log = compacted_log(tmp_path, clock)
    now = int(clock() * 1000)
    for i in range(30):
        log.append(keyed([(b"k%d" % (i % 4), b"v%d" % i)], now))
    log.compact()
    cleaned_to = log.cleaner_state.checkpoint
    assert cleaned_to > 4
    log.truncate_to(cleaned_to - 3)
    assert log.cleaner_state.checkpoint == log.log_end_offset == cleaned_to - 3
    for i in range(10):
        log.append(keyed([(b"k%d" % (i % 4), b"w%d" % i)], now))
    log.delete_records_before(log.log_end_offset - 1)
    assert log.cleaner_state.checkpoint == log.log_start_offset
    log.truncate_fully_and_start_at(100)
    assert log.cleaner_state.checkpoint == 100
    log.close()
