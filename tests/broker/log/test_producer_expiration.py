"""producer.id.expiration.ms: from the broker config to every log's producer state,
and the periodic removal (LogManager.remove_expired_producers)."""

from broker.cluster.replica_manager import default_log_config
from broker.config import BrokerConfig
from broker.log import LogConfig, LogManager, PartitionLog
from broker.protocol.records import BatchBuilder

T0 = 1_000_000.0  # seconds


class Clock:
    def __init__(self, t=T0):
        self.t = t

    def __call__(self):
        return self.t


def idempotent(pid: int, seq: int, transactional: bool = False) -> bytes:
    b = BatchBuilder(
        producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=transactional
    )
    b.append(b"v", timestamp_ms=int(T0 * 1000))
    return b.build()


def test_the_broker_setting_reaches_the_log_config(tmp_path):
    config = BrokerConfig.load(None, ["producer.id.expiration.ms=5000"], tmp_path)
    defaults = default_log_config(config)
    assert defaults.producer_id_expiration_ms == 5000
    topic = LogConfig.from_props({"retention.ms": "1000"}, base=defaults)
    assert topic.producer_id_expiration_ms == 5000
    assert "producer.id.expiration.ms" not in defaults.to_props()  # not a topic config
    assert config["producer.id.expiration.check.interval.ms"] == 600_000  # Kafka's default


def test_an_idle_producer_is_forgotten_once_expired(tmp_path):
    clock = Clock()
    log = PartitionLog(tmp_path / "t-0", LogConfig(producer_id_expiration_ms=1000), clock=clock)
    log.append(idempotent(1, 0))
    log.append(idempotent(2, 0))
    clock.t += 0.5
    log.append(idempotent(2, 1))
    clock.t += 0.5  # producer 1 idle for 1000 ms, producer 2 for 500 ms
    assert log.remove_expired_producers() == 1
    assert set(log.producer_state.producers) == {2}
    info = log.append(idempotent(1, 17))  # unknown again: any sequence is accepted
    assert info.size > 0
    log.close()


def test_a_producer_with_a_transaction_ongoing_never_expires(tmp_path):
    clock = Clock()
    log = PartitionLog(tmp_path / "t-0", LogConfig(producer_id_expiration_ms=1000), clock=clock)
    log.append(idempotent(1, 0, transactional=True))
    clock.t += 10
    assert log.remove_expired_producers() == 0
    log.close()


def test_update_config_changes_the_expiration(tmp_path):
    clock = Clock()
    log = PartitionLog(tmp_path / "t-0", LogConfig(), clock=clock)
    log.append(idempotent(1, 0))
    clock.t += 2
    assert log.remove_expired_producers() == 0  # a day by default
    log.update_config(LogConfig(producer_id_expiration_ms=1000))
    assert log.remove_expired_producers() == 1
    log.close()


def test_expired_producers_are_not_loaded_from_a_snapshot(tmp_path):
    clock = Clock()
    config = LogConfig(producer_id_expiration_ms=1000)
    log = PartitionLog(tmp_path / "t-0", config, clock=clock)
    log.append(idempotent(1, 0))
    log.close()
    clock.t += 2
    reopened = PartitionLog(tmp_path / "t-0", config, clock=clock, clean_shutdown=True)
    assert reopened.producer_state.producers == {}
    reopened.close()


def test_the_manager_removes_expired_producers_of_every_log_and_retention_does_not(tmp_path):
    clock = Clock()
    manager = LogManager(tmp_path, LogConfig(producer_id_expiration_ms=1000), clock=clock)
    for partition in range(3):
        manager.create("t", partition).append(idempotent(partition, 0))
    clock.t += 5
    assert manager.run_retention() == 0
    assert all(p.producer_state.producers for p in manager.all_logs())
    assert manager.remove_expired_producers() == 3
    assert manager.remove_expired_producers() == 0
    manager.close()
