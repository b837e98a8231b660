"""Pure parts of the broker: config parsing, topic names, the metadata store, the purgatory."""

import asyncio

import pytest

from broker.cluster.metadata_store import LocalMetadataStore, TopicMeta
from broker.cluster.names import InvalidTopicName, validate_topic_name
from broker.cluster.partition import Partition, PartitionError
from broker.cluster.replica_manager import default_log_config
from broker.config import BrokerConfig, ConfigError, parse_listener, parse_properties
from broker.log import AppendInfo
from broker.protocol import ErrorCode
from broker.server.handlers.produce import DelayedProduce
from broker.server.purgatory import DelayedOperation, Purgatory

# -- config ---------------------------------------------------------------------------


def test_properties_syntax():
    text = "# comment\n! also\na=1\nb : two\nc three\nd = x \\\n   y\n\nempty=\n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "three", "d": "x y", "empty": ""}


def test_config_layers_and_defaults(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("num.partitions=4\nlog.retention.hours=1\nauto.create.topics.enable=FALSE\n")
    cfg = BrokerConfig.load(f, ["num.partitions=6", "broker.id=3"], tmp_path / "d", "0.0.0.0:9999")
    assert cfg["num.partitions"] == 6
    assert cfg.broker_id == 3
    assert cfg["auto.create.topics.enable"] is False
    assert cfg["min.insync.replicas"] == 1
    assert cfg["offsets.topic.num.partitions"] == 50
    assert cfg["connections.max.idle.ms"] == 600000
    assert cfg.listen == ("0.0.0.0", 9999)
    assert cfg.advertised_address == ("127.0.0.1", 9999)
    log_cfg = default_log_config(cfg)
    assert log_cfg.retention_ms == 3_600_000
    assert log_cfg.segment_bytes == 1 << 30
    assert log_cfg.max_message_bytes == 1048588


def test_config_synonyms_precedence(tmp_path):
    cfg = BrokerConfig.load(
        None, ["log.retention.minutes=5", "log.retention.ms=1234", "log.roll.hours=2"], tmp_path
    )
    log_cfg = default_log_config(cfg)
    assert log_cfg.retention_ms == 1234
    assert log_cfg.segment_ms == 2 * 3_600_000
    assert cfg.topic_default_source("retention.ms") == "log.retention.ms"
    assert cfg.topic_default_source("segment.bytes") is None


@pytest.mark.parametrize(
    "override, key",
    [
        ("no.such.key=1", "no.such.key"),
        ("num.partitions=many", "num.partitions"),
        ("auto.create.topics.enable=yes", "auto.create.topics.enable"),
        ("num.partitions=0", "num.partitions"),
        ("listeners=SSL://h:1", "listener"),
        ("advertised.listeners=nohostport", "listener"),
    ],
)
def test_config_errors_name_the_key(tmp_path, override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.load(None, [override], tmp_path)


def test_config_requires_data_dir():
    with pytest.raises(ConfigError, match="log.dirs"):
        BrokerConfig.load()


def test_listener_forms():
    assert parse_listener("PLAINTEXT://broker1:9093") == ("broker1", 9093)
    assert parse_listener("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listener("[::1]:9092") == ("::1", 9092)


# -- topic names ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "__consumer_offsets", "x" * 249, "..."])
def test_legal_topic_names(name):
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    "name", ["", ".", "..", "x" * 250, "../../etc", "a/b", "a\\b", "a b", "é", "a\x00", None]
)
def test_illegal_topic_names(name):
    with pytest.raises(InvalidTopicName):
        validate_topic_name(name)


# -- metadata store -------------------------------------------------------------------


def test_metadata_store_persists_atomically(tmp_path):
    store = LocalMetadataStore(tmp_path)
    meta = TopicMeta("t", 2, 1, {"retention.ms": "5"}, [[0], [0]])
    store.put(meta)
    (tmp_path / "meta" / "topics" / "junk.json.tmp").write_text("{")
    (tmp_path / "meta" / "topics" / "broken.json").write_text("{not json")
    again = LocalMetadataStore(tmp_path)
    assert again.cluster_id == store.cluster_id
    assert again.get("t") == meta
    assert set(again.topics()) == {"t"}
    assert not (tmp_path / "meta" / "topics" / "junk.json.tmp").exists()
    again.delete("t")
    assert LocalMetadataStore(tmp_path).get("t") is None
    with pytest.raises(InvalidTopicName):
        again.put(TopicMeta("../x", 1, 1, {}, [[0]]))


# -- purgatory ------------------------------------------------------------------------


class FakeClock:
    def __init__(self):
        self.timers = []

    def call_later(self, delay, fn):
        timer = FakeTimer(delay, fn)
        self.timers.append(timer)
        return timer

    def fire_all(self):
        for t in self.timers:
            if not t.cancelled:
                t.fn()


class FakeTimer:
    def __init__(self, delay, fn):
        self.delay, self.fn, self.cancelled = delay, fn, False

    def cancel(self):
        self.cancelled = True


class Waiting(DelayedOperation):
    def __init__(self, ready, timeout_s=1.0):
        super().__init__(timeout_s)
        self.ready = ready
        self.completions = 0
        self.expirations = 0

    def try_complete(self):
        return self.ready() and self.force_complete()

    def on_complete(self):
        self.completions += 1

    def on_expire(self):
        self.expirations += 1


def test_purgatory_completes_once_when_key_changes():
    clock = FakeClock()
    purgatory = Purgatory("test", clock.call_later)
    state = {"ready": False}
    op = Waiting(lambda: state["ready"])
    assert purgatory.try_complete_else_watch(op, [("t", 0), ("t", 1)]) is False
    assert purgatory.watched() == 1
    assert purgatory.check_and_complete(("t", 0)) == 0
    state["ready"] = True
    assert purgatory.check_and_complete(("t", 1)) == 1
    assert purgatory.check_and_complete(("t", 0)) == 0
    clock.fire_all()
    assert (op.completions, op.expirations) == (1, 0)
    assert purgatory.watched() == 0 and clock.timers[0].cancelled


def test_purgatory_immediate_and_expiry():
    clock = FakeClock()
    purgatory = Purgatory("test", clock.call_later)
    now = Waiting(lambda: True)
    assert purgatory.try_complete_else_watch(now, ["k"]) is True
    assert now.completions == 1 and not clock.timers
    later = Waiting(lambda: False, timeout_s=0.5)
    purgatory.try_complete_else_watch(later, ["k"])
    assert clock.timers[0].delay == 0.5
    clock.fire_all()
    assert (later.completions, later.expirations) == (1, 1)
    assert purgatory.watched("k") == 0
    assert later.force_complete() is False


def test_purgatory_complete_all():
    clock = FakeClock()
    purgatory = Purgatory("test", clock.call_later)
    ops = [Waiting(lambda: False) for _ in range(3)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [i % 2])
    assert purgatory.complete_all() == 3
    assert all(op.completions == 1 for op in ops)


# -- partition state and delayed produce (the seams replication will use) ---------------


class FakeLog:
    def __init__(self):
        self.log_start_offset = 0
        self.log_end_offset = 0

    def append(self, records, leader_epoch=0):
        first = self.log_end_offset
        self.log_end_offset += len(records)
        return AppendInfo(first, self.log_end_offset - 1, -1, -1, 1, len(records))


def test_high_watermark_is_min_leo_of_isr():
    changes = []
    p = Partition("t", 0, FakeLog(), 0, [0, 1], min_insync_replicas=2, on_change=changes.append)
    p.isr = {0, 1}
    p.append_as_leader(b"abc", required_acks=-1)
    assert p.log_end_offset == 3 and p.high_watermark == 0
    assert p.enough_replicas_for(3) == (False, ErrorCode.NONE)
    p.update_follower_leo(1, 2)
    assert p.high_watermark == 2
    p.update_follower_leo(1, 3)
    assert p.high_watermark == 3 and p.enough_replicas_for(3) == (True, ErrorCode.NONE)
    assert len(changes) == 3
    p.isr = {0}
    with pytest.raises(PartitionError) as e:
        p.append_as_leader(b"x", required_acks=-1)
    assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    p.append_as_leader(b"x", required_acks=1)
    assert p.high_watermark == 4


def test_delayed_produce_waits_for_hw_then_times_out():
    loop = asyncio.new_event_loop()
    try:
        clock = FakeClock()
        purgatory = Purgatory("produce", clock.call_later)
        parts = []
        for i in range(2):
            p = Partition("t", i, FakeLog(), 0, [0, 1])
            p.isr = {0, 1}
            p.on_change = lambda part: purgatory.check_and_complete(part.key)
            p.append_as_leader(b"ab", required_acks=-1)
            parts.append(p)
        resp = [{"error_code": 0, "base_offset": 0}, {"error_code": 0, "base_offset": 0}]
        future = loop.create_future()
        op = DelayedProduce(
            5.0, [(parts[0], 2, resp[0]), (parts[1], 2, resp[1])], {"r": resp}, future
        )
        assert not purgatory.try_complete_else_watch(op, [p.key for p in parts])
        parts[0].update_follower_leo(1, 2)
        assert not future.done()
        clock.fire_all()
        assert future.result() == {"r": resp}
        assert resp[0]["error_code"] == 0
        assert resp[1]["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    finally:
        loop.close()


def test_wait_replicated_for_internal_writers():
    from broker.server.handlers.produce import wait_replicated

    class Core:
        produce_purgatory = Purgatory("produce")

    async def main():
        p = Partition("__consumer_offsets", 0, FakeLog(), 0, [0, 1])
        p.isr = {0, 1}
        p.on_change = lambda part: Core.produce_purgatory.check_and_complete(part.key)
        p.append_as_leader(b"abc", required_acks=-1)
        waiter = asyncio.create_task(wait_replicated(Core, p, 3, 5.0))
        await asyncio.sleep(0)
        assert not waiter.done()
        p.update_follower_leo(1, 3)
        assert await waiter == ErrorCode.NONE
        assert await wait_replicated(Core, p, 4, 0.01) == ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(main())
