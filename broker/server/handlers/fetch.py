"""Fetch: read ranges of the log, long-poll when there is not enough yet.

A fetch reads every requested partition once (`read_partitions`): consumers up to
the high watermark, followers (replica_id >= 0) up to the log end. Each answer's
records are the log's `FetchSlice` (file, position, length) that the connection sends
with sendfile; no record bytes are copied into Python.

Size rules: partitions are served in request order; each gets at most
`partition_max_bytes` and the response at most `max_bytes` (v3+), except that the
first batch of the first non-empty partition always goes out whole (KIP-74). A later
partition whose first batch would not fit the remaining budget gets no records.
Slices always end on a batch boundary (the log never cuts a batch), which clients
accept as readily as the partial trailing batch Kafka sometimes sends.

Long poll: if fewer than `min_bytes` are available and `max_wait_ms` > 0, the fetch
waits in the fetch purgatory as a `DelayedFetch` watching all its partitions. Every
append (or high-watermark move) re-reads; the fetch answers once `min_bytes` are
there, a partition turns to an error, or the wait expires (then with whatever is
there).

Isolation (KIP-98, v4+): a read_committed consumer (isolation_level 1) reads up to
the partition's last stable offset instead of the high watermark and gets, with its
records, the aborted transactions overlapping them (producer id, first offset; from
the segments' `.txnindex`, searched from the fetch offset to the end of the slice)
so that it drops their records; it gets an empty list when nothing was aborted
there, read_uncommitted gets null. A partition that never saw an abort skips the
search, so read_committed (librdkafka's default) costs nothing more there. Every
answer carries the last stable offset. A waiting read_committed fetch re-reads on
each `on_change`, which fires when the LSO can move (HW moves, markers).

Fetch v13+ names topics by id and v15+ moves the replica id into `replica_state`
(`_by_id` maps both back). Fetch v0-3 predate record batches v2: their answers are down-converted to legacy
messages (protocol/legacy.py) from bytes read out of the slice, or, for a consumer
of a topic with message.downconversion.enable=false, answered UNSUPPORTED_VERSION;
later versions never touch the record bytes.

Quota (broker.quotas): a consumer's answer counts its record bytes against its
`consumer_byte_rate`; over it, the fetch is answered empty (no partitions, the bytes
taken back) with the throttle time, and `ctx.throttle_ms` tells the connection to
throttle, as Kafka does. Followers are never throttled.

Replication throttle (broker.quotas.replication, Kafka's shouldLeaderThrottle): a
follower's fetch of a partition in this broker's leader-throttled set, by a follower
not in the ISR, while `leader.replication.throttled.rate` is exceeded, answers that
partition without records (its offsets as usual) and counts nothing of it toward
`min_bytes`, so a waiting fetch is not completed by it; the other partitions are
unaffected. The record bytes of throttled partitions sent to followers count toward
the rate, in sync or not.

Authorization: a consumer needs READ on each topic, a follower CLUSTER_ACTION on
the cluster; a denied topic's partitions answer TOPIC_AUTHORIZATION_FAILED.

Follower fetch seam: a follower whose last fetched epoch (v12+) diverges from this
log gets `diverging_epoch` and nothing else (`_divergence`). Otherwise, for
replica_id >= 0 the fetch offset is reported to
`Partition.update_follower_leo` (which moves the high watermark and completes
waiting acks=all produces). Only replicas listed in the partition's assignment may
fetch; on a single node there are none, so such fetches get
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import asyncio

from broker.log.common import OffsetOutOfRangeError
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.legacy import down_convert
from broker.quotas.manager import FETCH
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles
from broker.server.purgatory import DelayedOperation

UNLIMITED = 0x7FFFFFFF
UNKNOWN_ID = ErrorCode.UNKNOWN_TOPIC_ID  # v13+ names topics by id: an id nobody knows


def _empty(index: int, code: ErrorCode, partition=None, lso: int | None = None) -> dict:
    if lso is None:
        lso = partition.last_stable_offset if partition is not None else -1
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": partition.high_watermark if partition is not None else -1,
        "last_stable_offset": lso,
        "log_start_offset": partition.log_start_offset if partition is not None else -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


def _divergence(partition, req: dict) -> dict | None:
    """A follower's log diverges from ours (Fetch v12+, KIP-595's check) when the
    epoch of its last fetched batch ends here before its fetch offset, or is unknown
    here: answer where our matching epoch ends, with no records and no position
    update, so that it truncates without a separate OffsetForLeaderEpoch."""
    last_epoch = req["last_fetched_epoch"]
    if last_epoch < 0:
        return None
    epoch, end = partition.log.leader_epoch_cache.end_offset_for(last_epoch)
    if epoch < last_epoch or end < req["fetch_offset"]:
        return {"epoch": epoch, "end_offset": end}
    return None


def read_partitions(
    core, body: dict, denied: frozenset[str] = frozenset()
) -> tuple[list[dict], int, bool]:
    """One pass over the request -> (topic responses, bytes found, any partition error).
    Partitions of `denied` topics answer TOPIC_AUTHORIZATION_FAILED unread."""
    replica_id = body["replica_id"]
    follower = replica_id >= 0
    read_committed = not follower and body.get("isolation_level", 0) == 1
    budget = body["max_bytes"] if body["max_bytes"] > 0 else UNLIMITED
    found = 0
    errors = False
    first = True
    replicas = core.replicas
    quota = core.replication_quotas.leader
    topics = []
    for topic in body["topics"]:
        name = topic["topic"]
        parts = []
        for req in topic["partitions"]:
            index = req["partition"]
            if name in denied:
                parts.append(_empty(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                errors = True
                continue
            partition = replicas.get_partition(name, index)
            if partition is None:
                code = replicas.missing_partition_error(name, index) if name else UNKNOWN_ID
                parts.append(_empty(index, code))
                errors = True
                continue
            code = partition.check_leader_epoch(req["current_leader_epoch"])
            if code == ErrorCode.NONE and not partition.is_leader:
                code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if code == ErrorCode.NONE and follower:
                if replica_id not in partition.replicas or replica_id == partition.broker_id:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                elif (diverging := _divergence(partition, req)) is not None:
                    resp = _empty(index, ErrorCode.NONE, partition)
                    resp["diverging_epoch"] = diverging
                    parts.append(resp)
                    continue
                elif req["fetch_offset"] <= partition.log_end_offset:
                    partition.update_follower_leo(replica_id, req["fetch_offset"])
                    if replica_id not in partition.isr:
                        core.cluster.follower_fetched(partition, replica_id)
                # else: a follower past our log end (a tail it must truncate first) is
                # not a position: the read below answers OFFSET_OUT_OF_RANGE.
            if code != ErrorCode.NONE:
                parts.append(_empty(index, code, partition))
                errors = True
                continue
            lso = partition.last_stable_offset
            resp = _empty(index, ErrorCode.NONE, partition, lso)
            if follower and quota.holds_back(partition, replica_id in partition.isr):
                parts.append(resp)
                continue
            limit = min(req["partition_max_bytes"], budget)
            try:
                piece = partition.read(
                    req["fetch_offset"],
                    max(limit, 1),
                    committed_only=not follower,
                    max_offset=lso if read_committed else None,
                )
            except OffsetOutOfRangeError:
                resp["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                errors = True
                piece = None
            if read_committed:
                resp["aborted_transactions"] = []
            if piece is not None and (first or piece.length <= budget):
                resp["records"] = piece
                found += piece.length
                budget = max(0, budget - piece.length)
                first = False
                if read_committed and partition.log.has_aborted:
                    resp["aborted_transactions"] = _aborted(partition, req, piece)
            parts.append(resp)
        topics.append({"topic": name, "topic_id": topic.get("topic_id"), "partitions": parts})
    return topics, found, errors


def _aborted(partition, req: dict, piece) -> list[dict]:
    txns = partition.log.collect_aborted(req["fetch_offset"], piece.end_offset)
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in txns]


def _response(ctx, topics: list[dict], body: dict) -> dict:
    core = ctx.core
    # followers are never throttled; a consumer's bytes are counted only under a quota
    if body["replica_id"] < 0 and core.quotas.enforces(FETCH):
        size = sum(len(p["records"]) for t in topics for p in t["partitions"])
        throttle_ms = core.quotas.record(FETCH, ctx.principal, ctx.header.client_id, size)
        if throttle_ms:
            core.quotas.unrecord(FETCH, ctx.principal, ctx.header.client_id, size)
            ctx.throttle_ms = throttle_ms
            return {
                "throttle_time_ms": throttle_ms,
                "error_code": ErrorCode.NONE,
                "session_id": 0,
                "responses": [],
            }
    if body["replica_id"] >= 0:
        _record_throttled(core, topics)
    _count_out(core, topics, body)
    if ctx.api_version <= 3:
        _down_convert(core, topics, ctx.api_version, body)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": 0,
        "responses": topics,
    }


def _record_throttled(core, topics: list[dict]) -> None:
    """The record bytes of leader-throttled partitions sent to a follower count toward
    `leader.replication.throttled.rate` (Kafka's sizeOfThrottledPartitions)."""
    quota = core.replication_quotas.leader
    size = 0
    for topic in topics:
        for part in topic["partitions"]:
            if len(part["records"]):
                partition = core.replicas.get_partition(topic["topic"], part["partition_index"])
                if partition is not None and quota.is_throttled(partition):
                    size += len(part["records"])
    if size:
        quota.record(size)


def _count_out(core, topics: list[dict], body: dict) -> None:
    """Bytes sent per topic, to followers or to consumers; for consumers also the
    records from each fetch offset to the end of what is sent (offsets, so a
    compacted topic's gaps count too)."""
    stats = core.metrics.topics
    follower = body["replica_id"] >= 0
    for topic, wanted in zip(topics, body["topics"], strict=True):
        sent = messages = 0
        for part, req in zip(topic["partitions"], wanted["partitions"], strict=True):
            piece = part["records"]
            if len(piece):
                sent += len(piece)
                messages += piece.end_offset - req["fetch_offset"]
        if not sent:
            continue
        if follower:
            stats[topic["topic"]].replication_bytes_out += sent
        else:
            stats[topic["topic"]].bytes_out += sent
            stats[topic["topic"]].messages_out += messages


def _down_convert(core, topics: list[dict], version: int, body: dict) -> None:
    """Fetch v0-3 answers legacy messages (v0-1 magic 0, v2-3 magic 1). A consumer's
    partition whose topic has message.downconversion.enable=false is answered
    UNSUPPORTED_VERSION instead, as Kafka answers it."""
    magic = 0 if version <= 1 else 1
    consumer = body["replica_id"] < 0
    for topic, wanted in zip(topics, body["topics"], strict=True):
        parts = topic["partitions"]
        for i, (part, req) in enumerate(zip(parts, wanted["partitions"], strict=True)):
            partition = core.replicas.get_partition(topic["topic"], req["partition"])
            if (
                consumer
                and partition is not None
                and not partition.log.config.message_downconversion_enable
            ):
                parts[i] = _empty(req["partition"], ErrorCode.UNSUPPORTED_VERSION)
            elif len(part["records"]):
                part["records"] = down_convert(
                    part["records"].read_bytes(),
                    magic,
                    req["fetch_offset"],
                    req["partition_max_bytes"],
                )


class DelayedFetch(DelayedOperation):
    """A fetch waiting for min_bytes; owned by the fetch purgatory."""

    def __init__(self, ctx, body: dict, future: asyncio.Future, denied: frozenset[str]):
        super().__init__(body["max_wait_ms"] / 1000)
        self.ctx = ctx
        self.core = ctx.core
        self.body = body
        self.denied = denied
        self.future = future
        self.result: list[dict] | None = None

    def try_complete(self) -> bool:
        if self.future.done():  # the client went away
            return self.force_complete()
        topics, found, errors = read_partitions(self.core, self.body, self.denied)
        if found >= self.body["min_bytes"] or errors:
            self.result = topics
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self.future.done():
            return
        if self.result is None:
            self.result, _, _ = read_partitions(self.core, self.body, self.denied)
        self.future.set_result(_response(self.ctx, self.result, self.body))


def _by_id(core, body: dict, version: int) -> None:
    """Fetch v13+ names topics by id (an unknown id gets UNKNOWN_TOPIC_ID); v15+
    carries the replica id in `replica_state`. Both are turned into the v12 shape."""
    if version >= 15:
        body["replica_id"] = body["replica_state"]["replica_id"]
    if version >= 13:
        for topic in body["topics"]:
            topic["topic"] = core.replicas.store.name_of(topic["topic_id"])


def _denied(ctx, body: dict) -> frozenset[str]:
    """Topics this fetch may not read: a follower (replica_id >= 0) needs
    CLUSTER_ACTION on the cluster for all of them, a consumer READ on each."""
    if ctx.core.authorizer is None:
        return frozenset()
    names = {t["topic"] for t in body["topics"] if t["topic"] is not None}
    if body["replica_id"] >= 0:
        return frozenset() if allowed(ctx, Op.CLUSTER_ACTION, RT.CLUSTER) else frozenset(names)
    return frozenset(n for n in names if not allowed(ctx, Op.READ, RT.TOPIC, n))


@handles(ApiKey.FETCH)
def fetch(ctx, body):
    core = ctx.core
    _by_id(core, body, ctx.api_version)
    denied = _denied(ctx, body)
    topics, found, errors = read_partitions(core, body, denied)
    if body["max_wait_ms"] <= 0 or found >= body["min_bytes"] or errors or not topics:
        return _response(ctx, topics, body)
    future = asyncio.get_running_loop().create_future()
    op = DelayedFetch(ctx, body, future, denied)
    keys = [(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]]
    core.fetch_purgatory.try_complete_else_watch(op, keys)
    return future
