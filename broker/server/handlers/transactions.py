"""Transaction coordinator APIs: InitProducerId with a transactional id (called from
producer_id.py), FindCoordinator for key type 1 (from groups.py), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions, all answered by
`broker.transactions`; and DescribeProducers, answered by the partition leaders' logs
(the producers a partition remembers, with the offset their open transaction began
at: what `kafka-transactions.sh find-hanging` and `abort --start-offset` read).

The `TransactionCoordinator` is `core.transactions` (built by the composition root,
broker/server/core.py, wired in broker/server/coordinators.py). Its state is the
compacted internal topic `__transaction_state`, created on the first FindCoordinator
for a transactional id as Kafka does, with `transaction.state.log.num.partitions`
partitions, which are loaded and unloaded as this broker gains and loses their
leadership. The coordinator epoch of a partition is its leader epoch.

`core.txn_verifier` answers KIP-890's produce-time check (a transactional batch on a
partition where the producer has no ongoing transaction): locally when this broker
coordinates the id, else by AddPartitionsToTxn v4 `verify_only` to the coordinator.

Authorization as KafkaApis: WRITE on the transactional id for InitProducerId,
AddPartitionsToTxn v0-3, AddOffsetsToTxn and EndTxn
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); WRITE on every topic a client adds, and never
an internal topic (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED);
READ on the group for AddOffsetsToTxn; CLUSTER_ACTION alone for AddPartitionsToTxn
v4+ (broker to broker); DESCRIBE on the id for DescribeTransactions and
ListTransactions (ids not allowed are left out, and so are the topics of a described
transaction the caller may not DESCRIBE); READ on the topic for DescribeProducers
(TOPIC_AUTHORIZATION_FAILED).
PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH to versions that predate it.

Transactions v2 (KIP-890 part 2), chosen per request as Kafka does: EndTxn v5 ends
the transaction with an epoch bump and answers the producer id and epoch to go on
with; AddPartitionsToTxn v5 from a partition leader with `verify_only` false adds the
partitions a Produce v12 (or TxnOffsetCommit v5) wrote to, starting a v2 transaction;
with `verify_only` v5 answers TRANSACTION_ABORTABLE for a partition not in the
transaction (v4: INVALID_TXN_STATE, for the leaders that predate it).
"""

from __future__ import annotations

import logging
import time

from broker.cluster.replica_manager import TopicError
from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed
from broker.server.coordinators import load_txn_partitions
from broker.server.dispatch import handles
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.state import by_topic
from common.topic_names import CONSUMER_OFFSETS, TRANSACTION_STATE, is_internal

log = logging.getLogger(__name__)
_INVALID = ErrorCode.INVALID_TXN_STATE

# The first version of each API that knows PRODUCER_FENCED.
_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
    ApiKey.TXN_OFFSET_COMMIT: 2,
}


def _now_ms() -> int:
    return int(time.time() * 1000)


def client_error(ctx, code: ErrorCode) -> ErrorCode:
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < _FENCED_SINCE[ctx.header.api_key]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def ensure_txn_topic(core) -> ErrorCode:
    if core.replicas.topic(TRANSACTION_STATE) is None:
        cfg = core.config
        try:
            core.topic_admin.create_topic(
                TRANSACTION_STATE,
                cfg["transaction.state.log.num.partitions"],
                cfg["transaction.state.log.replication.factor"],
                {
                    "cleanup.policy": "compact",
                    "compression.type": "uncompressed",
                    "min.insync.replicas": str(cfg["transaction.state.log.min.isr"]),
                    "segment.bytes": str(cfg["transaction.state.log.segment.bytes"]),
                    "unclean.leader.election.enable": "false",
                },
            )
        except TopicError as e:
            log.error("cannot create %s: %s", TRANSACTION_STATE, e)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if core.replicas.topic(TRANSACTION_STATE) is None:  # a cluster: created in the background
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
    load_txn_partitions(core.replicas, core.transactions)
    return ErrorCode.NONE


def coordinator_partition(core, transactional_id: str) -> int:
    return core.transactions.partition_for(transactional_id)


# -- requests ----------------------------------------------------------------------------


def _coordinator(ctx) -> TransactionCoordinator:
    return ctx.core.transactions


async def init_producer_id(ctx, body) -> dict:
    """InitProducerId with a transactional id (the caller checked WRITE on it)."""
    err, pid, epoch = await _coordinator(ctx).init_producer_id(
        body["transactional_id"],
        body["transaction_timeout_ms"],
        body.get("producer_id", -1),
        body.get("producer_epoch", -1),
        _now_ms(),
    )
    return {
        "throttle_time_ms": 0,
        "error_code": client_error(ctx, err),
        "producer_id": pid,
        "producer_epoch": epoch,
    }


def _partition_results(results: dict) -> list:
    by_topic: dict[str, list] = {}
    for (topic, p), code in results.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "partition_error_code": code})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


@handles(ApiKey.ADD_PARTITIONS_TO_TXN)
async def add_partitions_to_txn(ctx, body):
    if ctx.api_version < 4:
        results = await _add_partitions(
            ctx,
            body["v3_and_below_transactional_id"],
            body["v3_and_below_producer_id"],
            body["v3_and_below_producer_epoch"],
            body["v3_and_below_topics"],
            False,
            from_broker=False,
        )
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _partition_results(results)}
    if not allowed(ctx, Op.CLUSTER_ACTION, RT.CLUSTER):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "results_by_transaction": [],
        }
    answers = []
    for txn in body["transactions"]:
        results = await _add_partitions(
            ctx,
            txn["transactional_id"],
            txn["producer_id"],
            txn["producer_epoch"],
            txn["topics"],
            txn["verify_only"],
            from_broker=True,
        )
        answers.append(
            {
                "transactional_id": txn["transactional_id"],
                "topic_results": _partition_results(results),
            }
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": answers}


async def _add_partitions(ctx, tid, pid, epoch, topics, verify_only, from_broker) -> dict:
    """A client's request (v0-3) needs WRITE on the id and on each topic, and may
    never add an internal topic; a broker's (v4+) was checked for CLUSTER_ACTION."""
    tps = [(t["name"], p) for t in topics for p in t["partitions"]]
    if not from_broker and not allowed(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, tid):
        return dict.fromkeys(tps, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if verify_only:
        not_added = ErrorCode.TRANSACTION_ABORTABLE if ctx.api_version >= 5 else _INVALID
        return _coordinator(ctx).verify(tid, pid, epoch, tps, not_added)
    refused = {}
    for topic, p in tps:
        if not from_broker and (is_internal(topic) or not allowed(ctx, Op.WRITE, RT.TOPIC, topic)):
            refused[(topic, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            meta = ctx.core.replicas.topic(topic)
            if meta is None or not 0 <= p < meta.partitions:
                refused[(topic, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in tps}
    client_tv = 2 if from_broker and ctx.api_version >= 5 else 0  # a v2 produce's partitions
    err = await _coordinator(ctx).add_partitions(
        tid, pid, epoch, set(tps), _now_ms(), client_tv=client_tv
    )
    return dict.fromkeys(tps, client_error(ctx, err))


@handles(ApiKey.ADD_OFFSETS_TO_TXN)
async def add_offsets_to_txn(ctx, body):
    tid, group = body["transactional_id"], body["group_id"]
    if not allowed(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, tid):
        err = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not allowed(ctx, Op.READ, RT.GROUP, group):
        err = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        offsets_partition = ctx.core.groups.partition_for(group)
        err = await _coordinator(ctx).add_partitions(
            tid,
            body["producer_id"],
            body["producer_epoch"],
            {(CONSUMER_OFFSETS, offsets_partition)},
            _now_ms(),
        )
    return {"throttle_time_ms": 0, "error_code": client_error(ctx, err)}


@handles(ApiKey.END_TXN)
async def end_txn(ctx, body):
    """v5 (transactions v2) bumps the epoch and answers the producer id and epoch."""
    tid = body["transactional_id"]
    pid = epoch = -1
    if not allowed(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, tid):
        err = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        err, pid, epoch = await _coordinator(ctx).end_txn(
            tid,
            body["producer_id"],
            body["producer_epoch"],
            body["committed"],
            _now_ms(),
            client_tv=2 if ctx.api_version >= 5 else 0,
        )
    return {
        "throttle_time_ms": 0,
        "error_code": client_error(ctx, err),
        "producer_id": pid,
        "producer_epoch": epoch,
    }


@handles(ApiKey.DESCRIBE_TRANSACTIONS)
def describe_transactions(ctx, body):
    states = []
    for tid in body["transactional_ids"]:
        entry = {
            "error_code": ErrorCode.NONE,
            "transactional_id": tid,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        if not allowed(ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID, tid):
            entry["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            states.append(entry)
            continue
        err, meta = _coordinator(ctx).describe(tid)
        if err:
            entry["error_code"] = err
            states.append(entry)
            continue
        assert meta is not None  # describe() gives one with NONE
        grouped = by_topic(
            sorted(tp for tp in meta.partitions if allowed(ctx, Op.DESCRIBE, RT.TOPIC, tp[0]))
        )
        entry |= {
            "transaction_state": meta.state.display,
            "transaction_timeout_ms": meta.txn_timeout_ms,
            "transaction_start_time_ms": meta.txn_start_ms,
            "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in grouped.items()],
        }
        states.append(entry)
    return {"throttle_time_ms": 0, "transaction_states": states}


@handles(ApiKey.LIST_TRANSACTIONS)
def list_transactions(ctx, body):
    unknown, found = _coordinator(ctx).list(
        body["state_filters"],
        body["producer_id_filters"],
        body.get("duration_filter", -1),
        _now_ms(),
    )
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "unknown_state_filters": unknown,
        "transaction_states": [
            {
                "transactional_id": m.transactional_id,
                "producer_id": m.producer_id,
                "transaction_state": m.state.display,
            }
            for m in found
            if allowed(ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID, m.transactional_id)
        ],
    }


@handles(ApiKey.DESCRIBE_PRODUCERS)
def describe_producers(ctx, body):
    """Any replica answers from its own log, as Kafka's (kafka-transactions.sh
    `describe-producers --broker-id` asks a follower); a partition of a known topic
    hosted elsewhere is NOT_LEADER_OR_FOLLOWER, so clients look for its leader."""
    replicas = ctx.core.replicas
    topics = []
    for topic in body["topics"]:
        name = topic["name"]
        if not allowed(ctx, Op.READ, RT.TOPIC, name):
            topic_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif replicas.topic(name) is None:
            topic_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            topic_error = ErrorCode.NONE
        partitions = []
        for index in topic["partition_indexes"]:
            entry = {
                "partition_index": index,
                "error_code": topic_error,
                "error_message": None,
                "active_producers": [],
            }
            partition = replicas.get_partition(name, index) if not topic_error else None
            if partition is not None:
                entry["active_producers"] = _active_producers(partition.log.producer_state)
            elif not topic_error:
                entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            partitions.append(entry)
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def _active_producers(state) -> list[dict]:
    return [
        {
            "producer_id": p.producer_id,
            "producer_epoch": p.epoch,
            "last_sequence": -1 if p.last_seq is None else p.last_seq,
            "last_timestamp": p.last_timestamp,
            "coordinator_epoch": p.coordinator_epoch,
            "current_txn_start_offset": -1 if p.txn_first_offset is None else p.txn_first_offset,
        }
        for p in sorted(state.producers.values(), key=lambda p: p.producer_id)
    ]
