"""WriteTxnMarkers (inter-broker) and TxnOffsetCommit.

WriteTxnMarkers comes from a transaction coordinator on another broker: each marker
is appended to the partitions led here (`core.markers`, see
broker/server/coordinators.py: acks=all, and for `__consumer_offsets` the group
coordinator completes the producer's pending offsets); it needs ALTER on the cluster (an admin aborting a hanging transaction,
KIP-664) or CLUSTER_ACTION (a broker).

TxnOffsetCommit is answered by the group coordinator: the offsets go to the group's
`__consumer_offsets` partition as a transactional batch, pending until the marker,
once the transaction coordinator confirmed that partition is in the producer's
ongoing transaction (KIP-890). From v5 (transactions v2, KIP-890 part 2: the client
sends no AddOffsetsToTxn) the transaction coordinator adds that partition to the
transaction instead. A partition the coordinator finds missing is
TRANSACTION_ABORTABLE from v4, INVALID_TXN_STATE before. It needs WRITE on the
transactional id, READ on the group and READ on each topic.
"""

from __future__ import annotations

import asyncio
import time

from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles
from broker.server.handlers.transactions import client_error
from common.aio import within
from common.topic_names import CONSUMER_OFFSETS


@handles(ApiKey.WRITE_TXN_MARKERS)
async def write_txn_markers(ctx, body):
    denied = not (allowed(ctx, Op.ALTER, RT.CLUSTER) or allowed(ctx, Op.CLUSTER_ACTION, RT.CLUSTER))
    timeout_s = ctx.core.config["replica.socket.timeout.ms"] / 1000
    answers = []
    for marker in body["markers"]:
        tps = [(t["name"], p) for t in marker["topics"] for p in t["partition_indexes"]]
        if denied:
            codes = [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * len(tps)
        else:
            codes = await asyncio.gather(
                *(
                    ctx.core.markers.write(
                        tp,
                        marker["producer_id"],
                        marker["producer_epoch"],
                        marker["transaction_result"],
                        marker["coordinator_epoch"],
                        timeout_s,
                    )
                    for tp in tps
                )
            )
        by_topic: dict[str, list] = {}
        for (topic, p), code in zip(tps, codes, strict=True):
            by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": code})
        answers.append(
            {
                "producer_id": marker["producer_id"],
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
        )
    return {"markers": answers}


_ABORTABLE_SINCE = 4  # TxnOffsetCommit knows TRANSACTION_ABORTABLE
_ADDS_SINCE = 5  # transactions v2: the coordinator adds the offsets partition
_RETRIABLE = {
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


async def _verify(ctx, body) -> ErrorCode:
    """KIP-890 for offsets: the group's `__consumer_offsets` partition must be in the
    producer's ongoing transaction (AddOffsetsToTxn), else a zombie's offsets would
    stay pending for good. Coordinator hiccups answer COORDINATOR_NOT_AVAILABLE,
    which clients retry."""
    verifier = ctx.core.txn_verifier
    if verifier is None:
        return ErrorCode.NONE
    tp = (CONSUMER_OFFSETS, ctx.core.groups.partition_for(body["group_id"]))
    tid, pid, epoch = body["transactional_id"], body["producer_id"], body["producer_epoch"]
    call = (
        verifier(tid, pid, epoch, [tp], add=True)
        if ctx.api_version >= _ADDS_SINCE
        else verifier(tid, pid, epoch, [tp])
    )
    try:
        answer = await within(call, ctx.core.config["replica.socket.timeout.ms"] / 1000)
    except TimeoutError:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    code = ErrorCode(answer.get(tp, ErrorCode.INVALID_TXN_STATE))
    if code == ErrorCode.TRANSACTION_ABORTABLE and ctx.api_version < _ABORTABLE_SINCE:
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if code in _RETRIABLE else code


@handles(ApiKey.TXN_OFFSET_COMMIT)
async def txn_offset_commit(ctx, body):
    group_id = body["group_id"]
    offsets = {
        (t["name"], p["partition_index"]): (
            p["committed_offset"],
            p.get("committed_leader_epoch", -1),
            p["committed_metadata"],
        )
        for t in body["topics"]
        for p in t["partitions"]
    }
    if not allowed(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, body["transactional_id"]):
        results = dict.fromkeys(offsets, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not allowed(ctx, Op.READ, RT.GROUP, group_id):
        results = dict.fromkeys(offsets, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    else:
        denied = {tp for tp in offsets if not allowed(ctx, Op.READ, RT.TOPIC, tp[0])}
        results = dict.fromkeys(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        wanted = {tp: v for tp, v in offsets.items() if tp not in denied}
        err = await _verify(ctx, body) if wanted else ErrorCode.NONE
        if err:
            results |= dict.fromkeys(wanted, err)
        elif wanted:
            results |= await ctx.core.groups.commit_txn_offsets(
                group_id,
                body["producer_id"],
                body["producer_epoch"],
                body.get("member_id", ""),
                body.get("group_instance_id"),
                body.get("generation_id", -1),
                wanted,
                int(time.time() * 1000),
            )
    by_topic: dict[str, list] = {}
    for (topic, p), code in results.items():
        code = client_error(ctx, code)
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": code})
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
