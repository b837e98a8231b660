"""A tiny blocking Kafka client over the broker's own codec, for protocol-level tests."""

from broker.protocol.client import BlockingClient
from broker.protocol.records import BatchBuilder


class WireClient(BlockingClient):
    """One TCP connection to a broker on loopback; requests are answered in order."""

    def __init__(self, port: int, timeout: float = 10.0):
        super().__init__("127.0.0.1", port, timeout, client_id="wire-test")

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the broker closed the connection (EOF or reset) within timeout."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


# A DescribeAcls/DeleteAcls filter that matches every binding.
MATCH_ALL_ACLS = {
    "resource_type_filter": 1,
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}


def batch(*values: bytes, key: bytes | None = None) -> bytes:
    b = BatchBuilder()
    for v in values:
        b.append(v, key=key)
    return b.build()


def produce_body(
    topic: str, records: bytes, acks: int = 1, partition: int = 0, timeout_ms: int = 5000
) -> dict:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }


def fetch_body(
    topic: str,
    offset: int = 0,
    partition: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
