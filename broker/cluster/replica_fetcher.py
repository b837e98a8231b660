"""Replica fetchers: a follower copies its partitions from their leaders.

One `ReplicaFetcher` per leader broker, one TCP connection each, speaking the Kafka
protocol through `broker.protocol` (the broker's own codec), one request in flight:

1. Truncation (KIP-101/279), once per partition each time it gets a new leader or
   leader epoch: OffsetForLeaderEpoch v3 with the follower's latest epoch. The answer
   (epoch, end offset) says where the leader's history for that epoch ends; the
   follower truncates to min(that end, its own end of that epoch, its log end), so a
   tail the new leader never had (writes a deposed leader took but never committed)
   is removed instead of kept. No epoch known on either side: truncate to the high
   watermark, as Kafka does.
2. Fetch v11 with `replica_id` = this broker and `current_leader_epoch` for every
   partition, `fetch_offset` = the follower's log end offset: that offset is how the
   leader learns the follower's position (ISR, high watermark). Records are appended
   with `append_as_follower` (offsets and epochs kept as the leader wrote them); the
   follower's high watermark becomes min(leader's, own log end). End-transaction
   markers come as the leader wrote them and `append_as_follower` replays them into
   the follower's producer state and `.txnindex`, so a follower that becomes leader
   has the same ongoing transactions and aborted-transaction index. Leaders long-poll
   (`replica.fetch.wait.max.ms`), so a new batch reaches followers at once.

Fetchers connect to the leader's endpoint of `inter.broker.listener.name`; when that
listener is SSL, with the broker's truststore and (if it has one) its keystore as
client certificate, per `broker.server.tls.client_context`; when it is SASL_PLAINTEXT or
SASL_SSL, each new connection first authenticates (SaslHandshake v1, SaslAuthenticate
v2, broker.sasl.client) with `sasl.mechanism.inter.broker.protocol` and the
username/password of the listener's JAAS entry for that mechanism, as Kafka does.

Replication throttle (broker.quotas.replication, Kafka's shouldFollowerThrottle): a
partition in this broker's follower-throttled set that is not in sync (its lag,
leader's high watermark minus the follower's log end, was not 0 at the last fetch
that brought records, or no such fetch yet) is left out of a fetch while
`follower.replication.throttled.rate` is exceeded; the record bytes appended for
throttled partitions count toward that rate, in sync or not. A round with every
partition held back sends nothing and backs off.

A partition whose leader or epoch changed is moved to another fetcher by the cluster
node; answers for partitions that moved meanwhile are ignored. Connection errors close
the connection and retry after a short backoff; every network await has a timeout.
Event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
import struct

from broker.cluster.interbroker import open_to, sasl_login
from broker.log.common import InvalidOffsetError
from broker.protocol import ApiKey, ErrorCode, ProtocolError, decode_response, encode_request
from broker.protocol.records import CorruptRecordError
from broker.quotas.replication import ReplicationQuota
from broker.sasl.settings import client_credentials
from broker.server.tls import client_context
from broker.tasks import cancel_and_wait
from common.aio import within

log = logging.getLogger(__name__)

FETCH_VERSION = 11
EPOCH_VERSION = 3
BACKOFF_S = 0.1
_SIZE = struct.Struct(">i")


class _Fetching:
    """What a fetcher knows about one partition it copies."""

    __slots__ = ("partition", "epoch", "truncated", "lag")

    def __init__(self, partition):
        self.partition = partition
        self.epoch = partition.leader_epoch
        self.truncated = False
        self.lag: int | None = None  # as of the last fetch that brought records

    @property
    def in_sync(self) -> bool:
        """Kafka's PartitionFetchState.isReplicaInSync."""
        return self.lag == 0


class ReplicaFetcher:
    """Copies the partitions led by `leader_id`. Owned by the fetcher manager."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int):
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[tuple[str, int], _Fetching] = {}
        self._wake = asyncio.Event()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0
        self.task: asyncio.Task | None = None

    def add(self, partition) -> None:
        self.partitions[partition.key] = _Fetching(partition)
        self._wake.set()

    def _current(self, key) -> _Fetching | None:
        """The entry for `key` if it still follows this leader in the same epoch."""
        f = self.partitions.get(key)
        if f is None:
            return None
        p = f.partition
        if p.leader != self.leader_id or p.leader_epoch != f.epoch:
            return None
        return f

    async def run(self) -> None:
        while True:
            if not self.partitions:
                self._close()
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                await self._connect()
                if any(not f.truncated for f in self.partitions.values()):
                    await self._truncate()
                if not await self._fetch():
                    await asyncio.sleep(BACKOFF_S)
            except asyncio.CancelledError:
                self._close()
                raise
            except (OSError, EOFError, TimeoutError, ProtocolError, LookupError) as e:
                log.debug("fetcher for leader %d: %s", self.leader_id, e)
                self._close()
                await asyncio.sleep(BACKOFF_S)

    async def _connect(self) -> None:
        if self._writer is not None:
            return
        m = self.manager
        self._reader, self._writer = await open_to(
            m.node.brokers, self.leader_id, m.listener, m.tls, m.request_timeout_s
        )
        if m.sasl is not None:

            async def exchange(api_key: int, version: int, body: dict) -> dict:
                return await self._request(api_key, version, body, m.request_timeout_s)

            await sasl_login(exchange, *m.sasl)

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def _request(self, api_key: int, version: int, body: dict, timeout_s: float) -> dict:
        self._correlation += 1
        frame = encode_request(
            api_key, version, self._correlation, f"replica-{self.manager.broker_id}", body
        )
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None  # connected before any request
        writer.write(frame)

        async def exchange() -> dict:
            await writer.drain()
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            data = await reader.readexactly(size)
            correlation, resp = decode_response(api_key, version, data)
            if correlation != self._correlation:
                raise ProtocolError(f"correlation id {correlation} != {self._correlation}")
            return resp

        return await within(exchange(), timeout_s)

    # -- truncation -------------------------------------------------------------------

    async def _truncate(self) -> None:
        pending = [f for f in self.partitions.values() if not f.truncated]
        by_topic: dict[str, list] = {}
        for f in pending:
            p = f.partition
            by_topic.setdefault(p.topic, []).append(
                {
                    "partition": p.index,
                    "current_leader_epoch": f.epoch,
                    "leader_epoch": p.log.leader_epoch_cache.latest_epoch,
                }
            )
        body = {
            "replica_id": self.manager.broker_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp = await self._request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, body, self.manager.request_timeout_s
        )
        for topic in resp["topics"]:
            for r in topic["partitions"]:
                cur = self._current((topic["topic"], r["partition"]))
                if cur is None or cur.truncated or r["error_code"] != ErrorCode.NONE:
                    continue
                truncate_follower(cur.partition, r["leader_epoch"], r["end_offset"])
                cur.truncated = True

    # -- fetch ------------------------------------------------------------------------

    async def _fetch(self) -> bool:
        """One fetch round; False when nothing useful came back (back off)."""
        m = self.manager
        ready = [
            f
            for f in self.partitions.values()
            if f.truncated and not m.quota.holds_back(f.partition, f.in_sync)
        ]
        if not ready:
            return False
        by_topic: dict[str, list] = {}
        for f in ready:
            p = f.partition
            by_topic.setdefault(p.topic, []).append(
                {
                    "partition": p.index,
                    "current_leader_epoch": f.epoch,
                    "fetch_offset": p.log_end_offset,
                    "log_start_offset": p.log_start_offset,
                    "partition_max_bytes": m.max_bytes,
                }
            )
        body = {
            "replica_id": m.broker_id,
            "max_wait_ms": m.max_wait_ms,
            "min_bytes": 1,
            "max_bytes": m.response_max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        timeout = m.max_wait_ms / 1000 + m.request_timeout_s
        resp = await self._request(ApiKey.FETCH, FETCH_VERSION, body, timeout)
        useful = False
        for topic in resp["responses"]:
            for r in topic["partitions"]:
                cur = self._current((topic["topic"], r["partition_index"]))
                if cur is not None and cur.truncated:
                    useful |= self._apply(cur, r)
        return useful

    def _apply(self, f: _Fetching, r: dict) -> bool:
        p = f.partition
        code = r["error_code"]
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if p.log_end_offset < r["log_start_offset"]:
                p.log.truncate_fully_and_start_at(r["log_start_offset"])
            else:
                f.truncated = False
            return True
        if code != ErrorCode.NONE:
            return False
        records = r["records"]
        size = len(records) if records is not None else 0
        if size:
            try:
                p.log.append_as_follower(records)
                self.manager.node.metrics.topics[p.topic].replication_bytes_in += size
                if self.manager.quota.is_throttled(p):
                    self.manager.quota.record(size)
            except (InvalidOffsetError, CorruptRecordError) as e:
                log.warning("%s-%d: follower append failed (%s); re-truncating", *p.key, e)
                f.truncated = False
        if size or f.lag is None:
            f.lag = max(0, r["high_watermark"] - p.log_end_offset)
        p.update_follower_high_watermark(r["high_watermark"])
        if r["log_start_offset"] > p.log.log_start_offset:  # the leader deleted records
            p.log.delete_records_before(r["log_start_offset"])
        return True


def truncate_follower(partition, leader_epoch: int, end_offset: int) -> None:
    """Apply one OffsetForLeaderEpoch answer to a follower's log (KIP-101/279)."""
    plog = partition.log
    cache = plog.leader_epoch_cache
    mine = cache.latest_epoch
    if leader_epoch < 0 or end_offset < 0:
        target = partition.high_watermark
    elif leader_epoch == mine:
        target = end_offset
    else:
        _, my_end = cache.end_offset_for(leader_epoch)
        target = end_offset if my_end < 0 else min(end_offset, my_end)
    target = max(0, target)
    if target < plog.log_end_offset:
        log.info(
            "%s-%d: truncating from %d to %d (leader's epoch %d ends at %d)",
            partition.topic,
            partition.index,
            plog.log_end_offset,
            target,
            leader_epoch,
            end_offset,
        )
        plog.truncate_to(target)
    partition.update_follower_high_watermark(partition.high_watermark)


class ReplicaFetcherManager:
    """Every fetcher of this broker, by leader id. Owned by the cluster node."""

    def __init__(self, node, config, quota: ReplicationQuota):
        self.node = node
        self.quota = quota  # the follower side of the replication throttles
        self.broker_id = config.broker_id
        self.max_wait_ms = config["replica.fetch.wait.max.ms"]
        self.max_bytes = config["replica.fetch.max.bytes"]
        self.response_max_bytes = config["replica.fetch.response.max.bytes"]
        self.request_timeout_s = config["replica.socket.timeout.ms"] / 1000
        self.listener = config.listeners.inter_broker
        self.tls = None
        if config.listeners.by_name(self.listener).tls:
            self.tls = client_context(config.ssl_settings(self.listener))
        self.sasl = None  # (mechanism, username, password) on a SASL listener
        if config.listeners.by_name(self.listener).sasl:
            mechanism = config["sasl.mechanism.inter.broker.protocol"].strip().upper()
            self.sasl = (mechanism, *client_credentials(config, self.listener, mechanism))
        self.fetchers: dict[int, ReplicaFetcher] = {}

    def add(self, partition, leader_id: int) -> None:
        self.remove(partition.key)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(self, leader_id)
            fetcher.task = asyncio.create_task(fetcher.run())
        fetcher.add(partition)

    def remove(self, key) -> None:
        for fetcher in self.fetchers.values():
            fetcher.partitions.pop(key, None)

    def remove_all(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.partitions.clear()

    async def stop(self) -> None:
        await cancel_and_wait([f.task for f in self.fetchers.values()])
        self.fetchers.clear()
