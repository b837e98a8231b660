"""Produce: append record batches, answer per acks.

Authorization (broker.server.authz) comes before anything is created or appended:
transactional batches need WRITE on the request's transactional id (else the whole
request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic WRITE (else its
partitions are TOPIC_AUTHORIZATION_FAILED), and auto-creating a topic CREATE on the
cluster or the topic (else TOPIC_AUTHORIZATION_FAILED, as Kafka's Metadata answers).
Clients never append to the internal topics (`__consumer_offsets`,
`__transaction_state`), whatever their ACLs: INVALID_TOPIC_EXCEPTION, "Cannot append
to internal topic", as Kafka's ReplicaManager answers; only the coordinators write
them, through the partitions directly.

An invalid `acks` refuses the whole request before anything else: every partition
gets INVALID_REQUIRED_ACKS, no topic is created.

Each partition's batches go to `Partition.append_as_leader`, which validates them
(CRC, sizes against `max.message.bytes`, records that parse and decompress within
bounds, as Kafka's LogValidator; producer sequence and epoch), rewrites base offsets
and leader epochs and appends them byte-for-byte. A refusal is an `ApiError`
carrying its own code (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
OUT_OF_ORDER_SEQUENCE_NUMBER, NOT_LEADER_OR_FOLLOWER, ...), which the partition
answers.

Produce v0-2 carry the legacy message format (magic 0/1): it is converted to one v2
batch first (protocol/legacy.py), and the log stores only v2.

- acks=0: no response at all; if any partition failed the connection is closed
  (the only signal such a producer gets).
- acks=1: answer once the leader has appended.
- acks=all (-1): `min.insync.replicas` is checked before the append
  (NOT_ENOUGH_REPLICAS); the answer waits in the produce purgatory as a
  `DelayedProduce` (broker.cluster.delayed_produce) until the high watermark covers
  every appended batch, or `timeout_ms` passes (REQUEST_TIMED_OUT).

Unknown topics are created on first use when `auto.create.topics.enable` is on; a
topic that cannot be gives its code to every partition of it (INVALID_TOPIC_EXCEPTION
for an illegal name, UNKNOWN_TOPIC_OR_PARTITION when auto-creation is off,
KAFKA_STORAGE_ERROR when its files cannot be made).

KIP-951 (v10+): a partition answered NOT_LEADER_OR_FOLLOWER names its current leader
and epoch, and the response those leaders' endpoints.

Transactions (KIP-890 part 1): when the coordinator set `core.txn_verifier`, a
transactional batch for a partition where its producer has no transaction ongoing
is appended only once the coordinator confirms the partition was added to the
transaction (broker/server/txn_verification.py); the verification is awaited before
the appends, never inside one partition's check-append-update section, and a guard
taken before the await makes a marker that lands meanwhile void it
(INVALID_TXN_STATE). Without a verifier such batches append unverified. Produce
v12 (transactions v2, part 2) has the coordinator add the partition to the
transaction instead (the client sent no AddPartitionsToTxn).

A produce carrying transactional batches without a transactional id is refused
whole with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka refuses it.

Quota (broker.quotas): the request's size counts against the client's
`producer_byte_rate`; over it, `ctx.throttle_ms` tells the connection to throttle
(the appends happen all the same, as in Kafka).

A write that fails in the file system (ENOSPC on a full data directory, EIO) answers
KAFKA_STORAGE_ERROR, which clients retry: the log rolled the failed append back to
its last batch boundary, so the partition takes produces again once there is room.
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker.cluster.delayed_produce import DelayedProduce
from broker.log.common import RecordValidationError
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.errors import ApiError
from broker.protocol.legacy import magic_of, up_convert
from broker.protocol.records import (
    ATTRIBUTES_AT,
    MAGIC_AT,
    TRANSACTIONAL_MASK,
    CorruptRecordError,
)
from broker.quotas.manager import PRODUCE
from broker.server import txn_verification
from broker.server.authz import RT, Op, allowed, may_auto_create
from broker.server.dispatch import CloseConnection, handles
from broker.server.handlers.metadata import live_brokers
from common.topic_names import is_internal

log = logging.getLogger(__name__)
_STORAGE_LOG_EVERY_S = 10.0
_last_storage_log = {"at": -_STORAGE_LOG_EVERY_S, "suppressed": 0}


def _log_storage_error(what: str, answer: ErrorCode, e: OSError) -> None:
    """One clear line per 10 s while a data directory is full, not one per request."""
    now = time.monotonic()
    if now - _last_storage_log["at"] < _STORAGE_LOG_EVERY_S:
        _last_storage_log["suppressed"] += 1
        return
    more = _last_storage_log["suppressed"]
    _last_storage_log.update(at=now, suppressed=0)
    log.error(
        "storage error, produce to %s answered %s: %s%s",
        what,
        answer.name,
        e,
        f" ({more} more since the last report)" if more else "",
    )


def _partition_response(index: int, code: ErrorCode, message: str | None = None) -> dict:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


def _answer_all(body, code: ErrorCode) -> dict:
    """A response giving every partition of the request `code`."""
    return {
        "responses": [
            {
                "name": topic["name"],
                "partition_responses": [
                    _partition_response(p["index"], code) for p in topic["partition_data"]
                ],
            }
            for topic in body["topic_data"]
        ],
        "throttle_time_ms": 0,
    }


@handles(ApiKey.PRODUCE)
def produce(ctx, body):
    acks = body["acks"]
    if acks not in (0, 1, -1):  # the request is refused whole: nothing created or appended
        return _answer_all(body, ErrorCode.INVALID_REQUIRED_ACKS)
    core = ctx.core
    ctx.throttle_ms = core.quotas.record(
        PRODUCE, ctx.principal, ctx.header.client_id, ctx.request_size
    )
    if _has_transactional_records(body):
        tid = body.get("transactional_id")
        if tid is None or not allowed(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, tid):
            return _answer_all(body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    core.cluster.check_lease()
    plan = _plan(ctx, body)
    guards = txn_verification.guards_for(core, body, plan, ctx.api_version)
    if guards is None or not guards.pending:
        return _with_leaders(ctx, _append_all(core, body, plan, guards))
    return _with_leaders(ctx, asyncio.ensure_future(_verified_append_all(core, body, plan, guards)))


def _with_leaders(ctx, answer):
    """KIP-951 (v10+): a partition answered NOT_LEADER_OR_FOLLOWER carries its current
    leader and epoch, and the response those leaders' endpoints, so the client goes
    there without a Metadata round trip."""
    if ctx.api_version < 10 or answer is None:
        return answer
    if isinstance(answer, dict):
        return _add_leaders(ctx, answer)

    async def later():
        return _add_leaders(ctx, await answer)

    return asyncio.ensure_future(later())


def _add_leaders(ctx, response: dict) -> dict:
    cluster = ctx.core.cluster
    leaders = set()
    for topic in response["responses"]:
        for resp in topic["partition_responses"]:
            if resp["error_code"] != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                continue
            try:
                view = cluster.partition_view(topic["name"], resp["index"])
            except LookupError:
                continue
            if view.leader >= 0:
                resp["current_leader"] = {
                    "leader_id": view.leader,
                    "leader_epoch": view.leader_epoch,
                }
                leaders.add(view.leader)
    if leaders:
        response["node_endpoints"] = [
            b for b in live_brokers(ctx.core, ctx.listener) if b["node_id"] in leaders
        ]
    return response


def _plan(ctx, body) -> list[tuple[str, list[list]]]:
    """Per topic, per partition `[index, partition, records, response]`: the response
    already set for a partition that fails before its append, else None."""
    core = ctx.core
    replicas = core.replicas
    plan = []
    for topic in body["topic_data"]:
        name = topic["name"]
        topic_message = None
        if not allowed(ctx, Op.WRITE, RT.TOPIC, name):
            topic_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif is_internal(name):
            topic_error, topic_message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
            if replicas.topic(name) is not None:
                topic_error = ErrorCode.INVALID_TOPIC_EXCEPTION
                topic_message = f"Cannot append to internal topic {name}"
        elif not may_auto_create(ctx, name):
            topic_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            topic_error = core.topic_admin.auto_create(name)
        parts = []
        for pdata in topic["partition_data"]:
            index = pdata["index"]
            records = pdata["records"]
            partition = resp = None
            if topic_error != ErrorCode.NONE:
                resp = _partition_response(index, topic_error, topic_message)
            elif (partition := replicas.get_partition(name, index)) is None:
                resp = _partition_response(index, replicas.missing_partition_error(name, index))
            elif not records:
                resp = _partition_response(index, ErrorCode.CORRUPT_MESSAGE, "empty record set")
            elif ctx.api_version <= 2 and (records := _up_converted(records)) is None:
                resp = _partition_response(index, ErrorCode.CORRUPT_MESSAGE, "bad message set")
            parts.append([index, partition, records, resp])
        plan.append((name, parts))
    return plan


_INVALID = ErrorCode.INVALID_TXN_STATE
_VERIFY_MESSAGE = {
    True: "Partition was not added to the transaction",
    False: "Unable to verify the partition has been added to the transaction",
}


async def _verified_append_all(core, body, plan, guards):
    """KIP-890: ask the coordinator about the partitions that need it, then append."""
    errors = await guards.verify(body["timeout_ms"])
    for name, parts in plan:
        for part in parts:
            if part[3] is not None:
                continue
            code = errors.get((name, part[0]))
            if code is not None:
                not_added = code in (_INVALID, ErrorCode.TRANSACTION_ABORTABLE)
                part[3] = _partition_response(part[0], code, _VERIFY_MESSAGE[not_added])
                continue
            part[1] = core.replicas.get_partition(name, part[0])  # deleted meanwhile?
            if part[1] is None:
                code = core.replicas.missing_partition_error(name, part[0])
                part[3] = _partition_response(part[0], code)
    answer = _append_all(core, body, plan, guards)
    if isinstance(answer, asyncio.Future):
        return await answer  # DelayedProduce: completes by its own timeout at the latest
    return answer


def _append_all(core, body, plan, guards):
    """Append every planned partition (no await in here: each partition's producer
    state check, append and update stay one critical section) and answer per acks."""
    acks = body["acks"]
    failed: list[str] = []
    waiting = []
    responses = []
    for name, parts in plan:
        answers = []
        for index, partition, records, resp in parts:
            if resp is None:
                guard = guards.guard_for(name, index) if guards is not None else None
                resp, next_offset = _append(partition, index, records, acks, guard)
                if resp["error_code"] == ErrorCode.NONE:
                    stats = core.metrics.topics[name]
                    stats.messages_in += next_offset - resp["base_offset"]
                    stats.bytes_in += len(records)
                    if acks == -1:
                        waiting.append((partition, next_offset, resp))
            if resp["error_code"] != ErrorCode.NONE:
                failed.append(f"{name}-{index}: {ErrorCode(resp['error_code']).name}")
            answers.append(resp)
        responses.append({"name": name, "partition_responses": answers})
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed: " + ", ".join(failed))
        return None
    response = {"responses": responses, "throttle_time_ms": 0}
    if not waiting:
        return response
    future = asyncio.get_running_loop().create_future()
    op = DelayedProduce(body["timeout_ms"] / 1000, waiting, response, future)
    if core.produce_purgatory.try_complete_else_watch(op, [p.key for p, _, _ in waiting]):
        return response  # the usual single-node case: the HW moved with the append
    return future


def _has_transactional_records(body) -> bool:
    """Whether the produce carries transactional batches: only then does Kafka check
    WRITE on its transactional id, and refuse the whole request
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) when it names none, so that no
    transaction opens without the coordinator. The first batch's attributes of each
    partition are looked at, as Kafka does; legacy message sets are never transactional."""
    for topic in body["topic_data"]:
        for pdata in topic["partition_data"]:
            records = pdata["records"]
            if (
                records is not None
                and len(records) > ATTRIBUTES_AT + 1
                and records[MAGIC_AT] == 2
                and records[ATTRIBUTES_AT + 1] & TRANSACTIONAL_MASK
            ):
                return True
    return False


def _up_converted(records) -> bytes | None:
    """Produce v0-2 carry a legacy MessageSet (or, rarely, v2 batches): one v2 batch."""
    if magic_of(records) >= 2:
        return records
    try:
        return up_convert(records)
    except CorruptRecordError as e:
        log.info("refused a legacy message set: %s", e)
        return None


def _append(partition, index: int, records, acks: int, guard=None) -> tuple[dict, int]:
    """Append one partition's records -> (partition response, offset after the last)."""
    try:
        info = partition.append_as_leader(records, acks, guard)
    except RecordValidationError as e:
        resp = _partition_response(index, e.code, str(e))
        resp["record_errors"] = [
            {"batch_index": i, "batch_index_error_message": message}
            for i, message in e.record_errors
        ]
        return resp, -1
    except ApiError as e:
        return _partition_response(index, e.code, str(e)), -1
    except OSError as e:
        _log_storage_error(f"{partition.topic}-{index}", ErrorCode.KAFKA_STORAGE_ERROR, e)
        return _partition_response(index, ErrorCode.KAFKA_STORAGE_ERROR, str(e)), -1
    resp = _partition_response(index, ErrorCode.NONE)
    resp["base_offset"] = info.first_offset
    resp["log_append_time_ms"] = info.log_append_time
    resp["log_start_offset"] = partition.log_start_offset
    return resp, info.last_offset + 1
