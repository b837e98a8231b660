"""A broker whose data directory fills up, driven by a real client (confluent-kafka).

Kafka's contract, checked on a real process with its data directory on a small
tmpfs (or loop-mounted ext4): produces that cannot be written get KAFKA_STORAGE_ERROR
(56) and the broker stays up (no crash, no hang, one clear log line); every record
acknowledged before the fault reads back intact with valid CRCs, also after a
restart while the disk is still full; once there is room again the broker takes
produces without a restart, and a producer that kept retrying gets through.
"""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from broker.protocol import ApiKey
from broker.protocol.records import iter_batches
from testkit.procs import BrokerProcess, wait_until
from tests.broker.server.wire import WireClient, batch, produce_body
from tests.smallfs import SmallFs, fill, require_mount

TOPIC = "full"
VALUE_PAD = b"p" * 900


class Tally:
    """Delivery reports: acknowledged (offset -> value) and errors by code."""

    def __init__(self):
        self.acked: dict[int, bytes] = {}
        self.errors: dict[int, int] = {}

    def __call__(self, err, msg):
        if err is None:
            self.acked[msg.offset()] = msg.value()
        else:
            self.errors[err.code()] = self.errors.get(err.code(), 0) + 1


def read_partition(bootstrap: str, timeout: float = 30.0) -> dict[int, bytes]:
    """Every record of TOPIC-0 from offset 0 to the high watermark (CRCs checked)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-full", "check.crcs": True})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=timeout, cached=False)
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + timeout
        while len(got) < high and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                assert m.error() is None, m.error()
                got[m.offset()] = m.value()
        assert len(got) == high, f"read {len(got)} of {high} records"
        return got
    finally:
        c.close()


def check_files(data_dir) -> None:
    """Every segment of the partition is whole batches with valid CRCs."""
    for path in sorted((data_dir / f"{TOPIC}-0").glob("*.log")):
        data = path.read_bytes()
        assert sum(b.size for b in iter_batches(data, validate=True)) == len(data), path


@pytest.fixture
def small_fs(tmp_path):
    require_mount(tmp_path)
    with SmallFs(tmp_path / "mnt", size_kb=3 * 1024) as fs:
        yield fs


def test_full_data_dir_answers_storage_error_and_recovers(small_fs, tmp_path):
    broker = BrokerProcess(
        small_fs.path / "data",
        settings={"log.segment.bytes": 256 * 1024, "num.partitions": 1},
    )
    broker.log_path = tmp_path / "broker.log"  # the log must not compete for the space
    broker.start()
    try:
        # retries=0: each failed produce is reported to us with the broker's error code.
        strict = Tally()
        p = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "retries": 0,
                "enable.idempotence": False,
                "linger.ms": 2,
            }
        )
        seq = 0
        deadline = time.monotonic() + 45
        while strict.errors.get(KafkaError.KAFKA_STORAGE_ERROR, 0) < 20:
            assert time.monotonic() < deadline, f"disk never filled: {strict.errors}"
            for _ in range(50):
                p.produce(TOPIC, b"%08d:" % seq + VALUE_PAD, on_delivery=strict)
                seq += 1
            assert p.flush(30) == 0, "produce hung"
        assert set(strict.errors) == {KafkaError.KAFKA_STORAGE_ERROR}, strict.errors
        assert broker.proc.poll() is None, "broker died on a full disk"
        assert small_fs.free_bytes() < 64 * 1024
        acked_before = dict(strict.acked)
        assert len(acked_before) > 1000
        assert "answered KAFKA_STORAGE_ERROR: [Errno 28] No space left on device" in (
            broker.log_text()
        )

        # Everything acknowledged reads back exactly, while the disk is still full.
        assert read_partition(broker.bootstrap) == acked_before

        # The disk is now truly full (a filler takes what small batches left over).
        filler = fill(small_fs.path / "filler")
        with WireClient(broker.port) as c:
            r = c.request(ApiKey.PRODUCE, 8, produce_body(TOPIC, batch(VALUE_PAD * 8)))
            assert r["responses"][0]["partition_responses"][0]["error_code"] == 56

        # An idempotent producer with the default (unbounded) retries keeps trying.
        patient = Tally()
        p2 = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 100,
            }
        )
        for i in range(20):  # ~18 KiB in one batch: needs pages the disk does not have
            p2.produce(TOPIC, b"patient-%d:" % i + VALUE_PAD, on_delivery=patient)
        p2.poll(0.5)
        assert not patient.acked and not patient.errors

        # Clean stop and a restart on the still-full disk: reads work, nothing is lost.
        assert broker.stop() == 0
        broker.start()
        assert read_partition(broker.bootstrap) == acked_before
        check_files(broker.data_dir)

        # Room again: no restart needed for produces to succeed.
        filler.unlink()
        small_fs.grow(16 * 1024)
        grown = time.monotonic()
        wait_until(lambda: p2.flush(0.5) == 0, 60, "the retrying producer to get through")
        assert len(patient.acked) == 20 and not patient.errors
        recovery_s = time.monotonic() - grown
        after = Tally()
        for i in range(200):
            p.produce(TOPIC, b"after-%d" % i, on_delivery=after)
        assert p.flush(30) == 0
        assert len(after.acked) == 200 and not after.errors

        everything = {**acked_before, **patient.acked, **after.acked}
        assert read_partition(broker.bootstrap) == everything
        broker.kill()  # and a crash now: recovery keeps it all
        broker.start()
        assert read_partition(broker.bootstrap) == everything
        check_files(broker.data_dir)
        print(
            f"acked before the fault {len(acked_before)}, storage errors "
            f"{strict.errors[KafkaError.KAFKA_STORAGE_ERROR]}, retrying producer "
            f"through {recovery_s:.2f}s after space returned"
        )
    finally:
        broker.stop()
