"""BrokerChannels: the coordinator's requests to other brokers (WriteTxnMarkers to
partition leaders, AddPartitionsToTxn v4 `verify_only` from a partition leader to a
transaction coordinator: `verify_only` for KIP-890's check, or, for a transactions
v2 produce, adding the partition).

One connection per broker to its endpoint of `inter.broker.listener.name`, with the
same TLS and SASL settings as the replica fetchers (`ReplicaFetcherManager`), one
request in flight per connection (a lock). Every await has the replica socket
timeout; a failed exchange closes the connection, the caller retries.
Owned by the broker; event-loop only.
"""

from __future__ import annotations

import asyncio
import struct

from broker.cluster.interbroker import open_to, sasl_login
from broker.protocol import ApiKey, ErrorCode, ProtocolError, decode_response, encode_request
from broker.transactions.state import by_topic
from common.aio import within

_SIZE = struct.Struct(">i")


class _Conn:
    __slots__ = ("reader", "writer", "lock", "correlation")

    def __init__(self):
        self.reader = self.writer = None
        self.lock = asyncio.Lock()
        self.correlation = 0


class BrokerChannels:
    """`fetchers` is the cluster node's ReplicaFetcherManager (listener, TLS, SASL,
    timeout) and `brokers()` the live brokers' registrations by id; `purpose` names
    the connections' client id (the cluster node asks its peers about ZooKeeper
    outages on channels of its own, `zk_outage`)."""

    def __init__(self, fetchers, brokers, broker_id: int, purpose: str = "txn-coordinator"):
        self._settings = fetchers
        self._brokers = brokers
        self._client_id = f"{purpose}-{broker_id}"
        self._conns: dict[int, _Conn] = {}

    @property
    def timeout_s(self) -> float:
        return self._settings.request_timeout_s

    async def request(self, broker_id: int, api_key: int, version: int, body: dict) -> dict:
        conn = self._conns.setdefault(broker_id, _Conn())
        async with conn.lock:
            try:
                if conn.writer is None:
                    await self._connect(conn, broker_id)
                return await self._exchange(conn, api_key, version, body)
            except BaseException:
                self._close(conn)
                raise

    async def _connect(self, conn: _Conn, broker_id: int) -> None:
        st = self._settings
        conn.reader, conn.writer = await open_to(
            self._brokers(), broker_id, st.listener, st.tls, self.timeout_s
        )
        if st.sasl is not None:

            async def exchange(api_key: int, version: int, body: dict) -> dict:
                return await self._exchange(conn, api_key, version, body)

            await sasl_login(exchange, *st.sasl)

    async def _exchange(self, conn: _Conn, api_key: int, version: int, body: dict) -> dict:
        reader, writer = conn.reader, conn.writer
        assert reader is not None and writer is not None  # connected by _connect
        conn.correlation += 1
        corr = conn.correlation
        writer.write(encode_request(api_key, version, corr, self._client_id, body))

        async def answer() -> dict:
            await writer.drain()
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            got, resp = decode_response(api_key, version, await reader.readexactly(size))
            if got != corr:
                raise ProtocolError(f"correlation id {got} != {corr}")
            return resp

        return await within(answer(), self.timeout_s)

    @staticmethod
    def _close(conn: _Conn) -> None:
        if conn.writer is not None:
            conn.writer.close()
        conn.reader = conn.writer = None

    def close(self) -> None:
        for conn in self._conns.values():
            self._close(conn)
        self._conns.clear()

    # -- the two requests -------------------------------------------------------------

    async def write_markers(
        self, broker_id: int, pid: int, epoch: int, commit: bool, coordinator_epoch: int, tps
    ) -> dict:
        """WriteTxnMarkers v1 for one transaction: {(topic, partition): ErrorCode}."""
        body = {
            "markers": [
                {
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "transaction_result": commit,
                    "topics": [
                        {"name": t, "partition_indexes": ps} for t, ps in by_topic(tps).items()
                    ],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        }
        resp = await self.request(broker_id, ApiKey.WRITE_TXN_MARKERS, 1, body)
        return {
            (t["name"], p["partition_index"]): ErrorCode(p["error_code"])
            for m in resp["markers"]
            for t in m["topics"]
            for p in t["partitions"]
        }

    async def verify(
        self, broker_id: int, tid: str, pid: int, epoch: int, tps, verify_only: bool = True
    ) -> dict:
        """AddPartitionsToTxn v5, `verify_only` or adding the partitions (transactions
        v2): {(topic, partition): ErrorCode}."""
        body = {
            "transactions": [
                {
                    "transactional_id": tid,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "verify_only": verify_only,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic(tps).items()],
                }
            ]
        }
        resp = await self.request(broker_id, ApiKey.ADD_PARTITIONS_TO_TXN, 5, body)
        out = {tp: ErrorCode(resp["error_code"]) for tp in tps} if resp["error_code"] else {}
        for txn in resp["results_by_transaction"]:
            for t in txn["topic_results"]:
                for p in t["results_by_partition"]:
                    out[(t["name"], p["partition_index"])] = ErrorCode(p["partition_error_code"])
        return out
