"""The idempotent producer end to end: retries are acknowledged with their original
offsets and not appended twice, also after a broker SIGKILL (state rebuilt from the
log and the .snapshot files); gaps and stale epochs are refused."""

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.records import BatchBuilder
from tests.broker.server.wire import WireClient, produce_body


def idem_batch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(b"v%d" % (seq + i))
    return b.build()


def send(c: WireClient, records: bytes, acks: int = -1) -> dict:
    r = c.request(ApiKey.PRODUCE, 8, produce_body("idem", records, acks=acks))
    return r["responses"][0]["partition_responses"][0]


def test_retries_are_deduplicated_across_a_broker_sigkill(broker_factory):
    broker = broker_factory(settings={"log.segment.bytes": 400})
    with WireClient(broker.port) as c:
        init = c.request(
            ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000}
        )
        assert init["error_code"] == 0
        pid = init["producer_id"]
        assert [send(c, idem_batch(pid, 0, s))["base_offset"] for s in range(0, 20, 2)] == list(
            range(0, 20, 2)
        )
        dup = send(c, idem_batch(pid, 0, 16))
        assert (dup["error_code"], dup["base_offset"]) == (0, 16)
        assert (
            send(c, idem_batch(pid, 0, 40))["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        )
        assert send(c, idem_batch(pid, 1, 0))["base_offset"] == 20  # epoch bump restarts at 0
        assert send(c, idem_batch(pid, 0, 20))["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert list(broker.data_dir.glob("idem-0/*.snapshot"))
    broker.kill()
    broker.start()
    with WireClient(broker.port) as c:
        dup = send(c, idem_batch(pid, 1, 0))
        assert (dup["error_code"], dup["base_offset"]) == (0, 20)
        assert send(c, idem_batch(pid, 1, 2))["base_offset"] == 22
        init = c.request(
            ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None, "transaction_timeout_ms": 60000}
        )
        assert init["producer_id"] > pid  # ids stay unique across restarts
