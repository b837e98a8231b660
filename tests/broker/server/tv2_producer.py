"""A transactional producer that speaks transactions v2 (KIP-890 part 2) the way
Kafka 4's Java producer does once it sees `transaction.version` 2 finalized: no
AddPartitionsToTxn nor AddOffsetsToTxn, Produce v12 (the partition leader adds the
partition), TxnOffsetCommit v5 (the group coordinator adds the offsets partition),
EndTxn v5, whose answer gives the producer id and epoch of the next transaction.

No installed client speaks it (librdkafka 2.16 sends EndTxn v1 and Produce up to
v10, kafka-python 3.0 EndTxn up to v3, aiokafka and the Node clients likewise), so
the tests drive it over the broker's own codec. It routes each request as a client
does: Produce to the partition's leader (Metadata), InitProducerId and EndTxn to the
transaction coordinator, TxnOffsetCommit to the group coordinator (FindCoordinator).
"""

from __future__ import annotations

import time

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import BlockingClient
from broker.protocol.records import BatchBuilder

RETRIABLE = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}
DEADLINE_S = 60.0


class TV2Producer:
    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int = 60000):
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.bootstrap = (host, int(port))
        self.tid = transactional_id
        self.timeout_ms = timeout_ms
        self.conns: dict[object, BlockingClient] = {}
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- routing ------------------------------------------------------------------------

    def _conn(self, address: tuple[str, int]) -> BlockingClient:
        c = self.conns.get(address)
        if c is None:
            c = self.conns[address] = BlockingClient(*address, client_id="tv2-producer")
        return c

    def request(self, address, api_key: int, version: int, body: dict) -> dict:
        return self._conn(address).request(api_key, version, body)

    def _metadata(self, topic: str) -> dict:
        body = {
            "topics": [{"topic_id": None, "name": topic}],
            "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False,
        }
        return self.request(self.bootstrap, ApiKey.METADATA, 12, body)

    def leader(self, topic: str, partition: int) -> tuple[str, int]:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            meta = self._metadata(topic)
            brokers = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
            for t in meta["topics"]:
                for p in t["partitions"]:
                    if p["partition_index"] == partition and p["leader_id"] in brokers:
                        return brokers[p["leader_id"]]
            assert time.monotonic() < deadline, f"no leader for {topic}-{partition}"
            time.sleep(0.1)

    def coordinator(self, key: str, key_type: int) -> tuple[str, int]:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            resp = self.request(
                self.bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": key_type}
            )
            if resp["error_code"] == ErrorCode.NONE:
                return resp["host"], resp["port"]
            assert resp["error_code"] in RETRIABLE, ErrorCode(resp["error_code"])
            assert time.monotonic() < deadline, f"no coordinator for {key}"
            time.sleep(0.1)

    def _retrying(self, call, what: str):
        """call() -> (error code, result); retried while the error is retriable."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            err, result = call()
            if err not in RETRIABLE or time.monotonic() > deadline:
                return ErrorCode(err), result
            time.sleep(0.05)

    # -- the producer -------------------------------------------------------------------

    def init(self) -> None:
        def call():
            resp = self.request(
                self.coordinator(self.tid, 1),
                ApiKey.INIT_PRODUCER_ID,
                5,
                {"transactional_id": self.tid, "transaction_timeout_ms": self.timeout_ms},
            )
            return resp["error_code"], resp

        err, resp = self._retrying(call, "InitProducerId")
        assert err == ErrorCode.NONE, err
        self._adopt(resp["producer_id"], resp["producer_epoch"])

    def _adopt(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.epoch = producer_id, epoch
        self.sequences.clear()

    def records(self, topic: str, partition: int, *values: bytes, epoch=None) -> bytes:
        seq = self.sequences.get((topic, partition), 0)
        b = BatchBuilder(
            producer_id=self.producer_id,
            producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=seq,
            is_transactional=True,
        )
        for v in values:
            b.append(v)
        return b.build()

    def produce(
        self, topic: str, partition: int, *values: bytes, version: int = 12, epoch=None
    ) -> ErrorCode:
        """Produce `values` in the ongoing transaction (v12: no AddPartitionsToTxn)."""
        records = self.records(topic, partition, *values, epoch=epoch)
        body = {
            "transactional_id": self.tid,
            "acks": -1,
            "timeout_ms": 10000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        }

        def call():
            resp = self.request(self.leader(topic, partition), ApiKey.PRODUCE, version, body)
            part = resp["responses"][0]["partition_responses"][0]
            return part["error_code"], part

        err, _ = self._retrying(call, "Produce")
        if err == ErrorCode.NONE and epoch is None:
            self.sequences[(topic, partition)] = self.sequences.get((topic, partition), 0) + len(
                values
            )
        return err

    def commit_offsets(self, group: str, topic: str, partition: int, offset: int) -> ErrorCode:
        """TxnOffsetCommit v5 in the ongoing transaction (no AddOffsetsToTxn)."""
        body = {
            "transactional_id": self.tid,
            "group_id": group,
            "producer_id": self.producer_id,
            "producer_epoch": self.epoch,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "committed_offset": offset,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        }

        def call():
            resp = self.request(self.coordinator(group, 0), ApiKey.TXN_OFFSET_COMMIT, 5, body)
            return resp["topics"][0]["partitions"][0]["error_code"], None

        return self._retrying(call, "TxnOffsetCommit")[0]

    def end(self, commit: bool) -> ErrorCode:
        """EndTxn v5; on success the producer goes on with the id and epoch it answers."""
        body = {
            "transactional_id": self.tid,
            "producer_id": self.producer_id,
            "producer_epoch": self.epoch,
            "committed": commit,
        }

        def call():
            resp = self.request(self.coordinator(self.tid, 1), ApiKey.END_TXN, 5, body)
            return resp["error_code"], resp

        err, resp = self._retrying(call, "EndTxn")
        if err == ErrorCode.NONE:
            self._adopt(resp["producer_id"], resp["producer_epoch"])
        return err
