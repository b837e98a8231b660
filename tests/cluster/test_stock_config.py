"""Kafka's stock server.properties starts a broker: the keys that Kafka defines and
this broker does not use are named in one warning, the others apply (here it joins
the ZooKeeper the file names, moved to the test's own by --set)."""

from testkit.kafka import consume_all, produce
from testkit.procs import BrokerProcess
from tests.broker.test_config import KAFKA_SERVER_PROPERTIES


def test_kafkas_server_properties_start_a_broker(zookeeper, tmp_path):
    broker = BrokerProcess(
        tmp_path / "data",
        settings={"zookeeper.connect": f"{zookeeper.connect}/stock"},
        args=["--config", str(KAFKA_SERVER_PROPERTIES)],
    ).start()
    try:
        produce(broker.bootstrap, "stock", [b"a", b"b"])
        assert [m.value() for m in consume_all(broker.bootstrap, "stock")] == [b"a", b"b"]
    finally:
        broker.stop()
    log = broker.log_path.read_text()
    warnings = [line for line in log.splitlines() if "does not use" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0]
    assert warnings[0].endswith(
        "ignoring 5 Kafka setting(s) this broker does not use: num.io.threads, "
        "num.network.threads, num.recovery.threads.per.data.dir, socket.receive.buffer.bytes, "
        "socket.send.buffer.bytes"
    )
