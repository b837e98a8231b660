"""Share-group APIs (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe on the
group's coordinator, ShareFetch and ShareAcknowledge on the data partitions' leaders.
The service is `ctx.core.shares` (broker.share.manager).

ShareFetch: the request's acknowledgements are applied first and written to the
share-partitions' durable state (answered per partition in `acknowledge_error_code`
once written), then, unless it closes the session (epoch -1) or asks for no records
(`max_records` 0), the session's share-partitions are loaded where they are not yet
and records are acquired from each, up to `max_records` in all, `max_bytes` of whole
batches. ShareAcknowledge answers once its acknowledgements are written.
When none were acquired and `max_wait_ms` > 0 the request waits in the fetch
purgatory (a `DelayedShareFetch` on the session's partitions, woken by appends and by
records released) and acquires again, answering empty when the wait ends.

Authorization (Kafka's AclEntry for these APIs): READ on the group for the
heartbeat, ShareFetch and ShareAcknowledge (GROUP_AUTHORIZATION_FAILED for the whole
request), READ on each topic fetched or acknowledged (TOPIC_AUTHORIZATION_FAILED for
its partitions), DESCRIBE on each group described.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import NOT_REQUESTED, RT, Op, allowed, authorized_operations
from broker.server.dispatch import handles
from broker.server.purgatory import DelayedOperation
from broker.share.membership import ASSIGNOR
from broker.share.sessions import FINAL_EPOCH, INITIAL_EPOCH


def _now_ms() -> int:
    return int(time.time() * 1000)


def _topic_id(ctx, name: str) -> uuid.UUID:
    found = ctx.core.shares.topic_lookup(name)
    return found[0] if found is not None else uuid.UUID(int=0)


# -- ShareGroupHeartbeat ------------------------------------------------------------------


@handles(ApiKey.SHARE_GROUP_HEARTBEAT)
async def share_group_heartbeat(ctx, body):
    group_id = body["group_id"]
    if not allowed(ctx, Op.READ, RT.GROUP, group_id):
        return _heartbeat_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    shares = ctx.core.shares
    groups = ctx.core.groups
    if groups.groups.get(group_id) is not None or groups.consumer_group(group_id) is not None:
        return _heartbeat_error(
            ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
        )
    result = await shares.heartbeat(
        group_id,
        body["member_id"],
        body["member_epoch"],
        body["rack_id"],
        body["subscribed_topic_names"],
        ctx.header.client_id or "",
        f"/{ctx.client_host}",
        _now_ms(),
    )
    if result.error != ErrorCode.NONE:
        return _heartbeat_error(result.error, result.message)
    assignment = None
    if result.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": _topic_id(ctx, topic), "partitions": parts}
                for topic, parts in sorted(result.assignment.items())
            ]
        }
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "member_id": result.member_id,
        "member_epoch": result.epoch,
        "heartbeat_interval_ms": shares.group_config(group_id).share_heartbeat_interval_ms,
        "assignment": assignment,
    }


def _heartbeat_error(code: ErrorCode, message: str | None) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


# -- ShareGroupDescribe ---------------------------------------------------------------------


@handles(ApiKey.SHARE_GROUP_DESCRIBE)
def share_group_describe(ctx, body):
    return {
        "throttle_time_ms": 0,
        "groups": [_describe(ctx, group_id, body) for group_id in body["group_ids"]],
    }


def _describe(ctx, group_id: str, body: dict) -> dict:
    answer: dict = {
        "group_id": group_id,
        "error_message": None,
        "group_state": "Dead",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
        "authorized_operations": NOT_REQUESTED,
    }
    if not allowed(ctx, Op.DESCRIBE, RT.GROUP, group_id):
        return answer | {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    code, group = ctx.core.shares.describe(group_id)
    if group is None:
        message = (
            f"share group {group_id} not found" if code == ErrorCode.GROUP_ID_NOT_FOUND else None
        )
        return answer | {"error_code": code, "error_message": message}
    members = [
        {
            "member_id": m.member_id,
            "rack_id": m.rack_id,
            "member_epoch": m.epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": m.subscribed,
            "assignment": {
                "topic_partitions": [
                    {"topic_id": _topic_id(ctx, topic), "topic_name": topic, "partitions": parts}
                    for topic, parts in sorted(m.assignment.items())
                ]
            },
        }
        for m in group.members.values()
    ]
    if body["include_authorized_operations"]:
        answer["authorized_operations"] = authorized_operations(ctx, RT.GROUP, group_id)
    return answer | {
        "error_code": ErrorCode.NONE,
        "group_state": group.state,
        "group_epoch": group.epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": ASSIGNOR,
        "members": members,
    }


# -- ShareFetch and ShareAcknowledge: shared pieces ---------------------------------------


def _top_error(code: ErrorCode, message: str | None = None, fetch: bool = True) -> dict:
    body: dict = {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "responses": [],
        "node_endpoints": [],
    }
    if fetch:
        body["acquisition_lock_timeout_ms"] = 0
    return body


_NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def _leader(ctx, topic: str, index: int) -> dict:
    partition = ctx.core.shares.partition_of(topic, index)
    try:
        leader = ctx.core.cluster.leader_of(topic, index)
    except Exception:  # a topic the cluster view does not know (deleted meanwhile)
        leader = -1
    epoch = partition.leader_epoch if partition is not None else -1
    return {"leader_id": leader, "leader_epoch": epoch}


def _endpoints(ctx, leaders: set[int]) -> list[dict]:
    out = []
    for node in sorted(leaders):
        info = ctx.core.cluster.brokers.get(node)
        address = info.endpoints.get(ctx.listener) if info is not None else None
        if address is not None:
            out.append({"node_id": node, "host": address[0], "port": address[1], "rack": info.rack})
    return out


def _names(ctx, topics: list[dict]) -> dict[uuid.UUID, str | None]:
    store = ctx.core.replicas.store
    return {t["topic_id"]: store.name_of(t["topic_id"]) for t in topics}


def _partition_error(ctx, name: str | None, index: int) -> ErrorCode:
    """Why a partition of a request cannot be served here, or NONE."""
    if name is None:
        return ErrorCode.UNKNOWN_TOPIC_ID
    if not allowed(ctx, Op.READ, RT.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    partition = ctx.core.shares.partition_of(name, index)
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not partition.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.NONE


def _acknowledge_all(ctx, body: dict, group_id: str, member_id: str) -> dict:
    """Apply every partition's acknowledgement batches in memory: {(topic id, index):
    code}; `_persist_acknowledged` makes them durable before they are answered."""
    names = _names(ctx, body["topics"])
    shares = ctx.core.shares
    results: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    for topic in body["topics"]:
        name = names[topic["topic_id"]]
        for part in topic["partitions"]:
            index = part["partition_index"]
            code = _partition_error(ctx, name, index)
            batches = part["acknowledgement_batches"]
            if code == ErrorCode.NONE and batches:
                assert name is not None
                code = shares.acknowledge(group_id, member_id, name, index, batches)
            results[(topic["topic_id"], index)] = code
    return results


async def _persist_acknowledged(ctx, body: dict, group_id: str, results: dict) -> None:
    """Write the state of every partition whose acknowledgements were applied; one
    that cannot be written answers the write's error instead."""
    names = _names(ctx, body["topics"])
    acked = [
        (topic_id, index)
        for topic in body["topics"]
        for part in topic["partitions"]
        if part["acknowledgement_batches"]
        and results.get((topic_id := topic["topic_id"], index := part["partition_index"]))
        == ErrorCode.NONE
    ]
    codes = await asyncio.gather(
        *(ctx.core.shares.persist(group_id, names[t], i) for t, i in acked)
    )
    for key, code in zip(acked, codes, strict=True):
        results[key] = code


def _session_check(ctx, body: dict, group_id: str | None, member_id: str | None) -> dict | None:
    """The request-level refusals shared by ShareFetch and ShareAcknowledge."""
    fetch = ctx.header.api_key == ApiKey.SHARE_FETCH
    if not group_id:
        return _top_error(ErrorCode.INVALID_REQUEST, "GroupId is required", fetch)
    if not member_id:
        return _top_error(ErrorCode.INVALID_REQUEST, "MemberId is required", fetch)
    if not allowed(ctx, Op.READ, RT.GROUP, group_id):
        return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None, fetch)
    epoch = body["share_session_epoch"]
    has_acks = any(p["acknowledgement_batches"] for t in body["topics"] for p in t["partitions"])
    if epoch == INITIAL_EPOCH and has_acks:
        return _top_error(
            ErrorCode.INVALID_REQUEST,
            "acknowledgements are not allowed in the request opening a share session",
            fetch,
        )
    if epoch == INITIAL_EPOCH and not fetch:
        return _top_error(
            ErrorCode.INVALID_SHARE_SESSION_EPOCH,
            "ShareAcknowledge cannot open a share session",
            fetch,
        )
    code = ctx.core.shares.sessions.check(group_id, member_id, epoch)
    if code != ErrorCode.NONE:
        return _top_error(code, None, fetch)
    return None


# -- ShareAcknowledge ---------------------------------------------------------------------------


@handles(ApiKey.SHARE_ACKNOWLEDGE)
def share_acknowledge(ctx, body):
    group_id, member_id = body["group_id"], body["member_id"]
    refused = _session_check(ctx, body, group_id, member_id)
    if refused is not None:
        return refused
    results = _acknowledge_all(ctx, body, group_id, member_id)
    _end_of_request(ctx, body["share_session_epoch"], group_id, member_id)
    return _acknowledged(ctx, body, group_id, results)


async def _acknowledged(ctx, body: dict, group_id: str, results: dict) -> dict:
    await _persist_acknowledged(ctx, body, group_id, results)
    leaders: set[int] = set()
    responses: dict[uuid.UUID, list[dict]] = {}
    names = _names(ctx, body["topics"])
    for (topic_id, index), code in results.items():
        name = names[topic_id]
        leader = _leader(ctx, name, index) if name is not None else _NO_LEADER
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and leader["leader_id"] >= 0:
            leaders.add(leader["leader_id"])
        responses.setdefault(topic_id, []).append(
            {
                "partition_index": index,
                "error_code": code,
                "error_message": None,
                "current_leader": leader,
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "responses": [{"topic_id": t, "partitions": p} for t, p in responses.items()],
        "node_endpoints": _endpoints(ctx, leaders),
    }


def _end_of_request(ctx, epoch: int, group_id: str, member_id: str) -> None:
    """Move the session on after a request's acknowledgements, or close it (epoch -1,
    releasing what the member still holds)."""
    shares = ctx.core.shares
    if epoch == FINAL_EPOCH:
        session = shares.sessions.close(group_id, member_id)
        if session is not None:
            shares.release_session(session)
        return
    session = shares.sessions.get(group_id, member_id)
    if session is not None:
        shares.sessions.advance(session, _now_ms())


# -- ShareFetch --------------------------------------------------------------------------------


@handles(ApiKey.SHARE_FETCH)
def share_fetch(ctx, body):
    group_id, member_id = body["group_id"], body["member_id"]
    refused = _session_check(ctx, body, group_id, member_id)
    if refused is not None:
        return refused
    shares = ctx.core.shares
    epoch = body["share_session_epoch"]
    names = _names(ctx, body["topics"])
    names.update(_names(ctx, body["forgotten_topics_data"]))
    now = _now_ms()
    if epoch == INITIAL_EPOCH:
        session, old = shares.sessions.open(group_id, member_id, now)
        if old is not None:
            shares.release_session(old)
        ack_results: dict = {}
    else:
        ack_results = _acknowledge_all(ctx, body, group_id, member_id)
        session = shares.sessions.get(group_id, member_id)
        if epoch == FINAL_EPOCH:
            _end_of_request(ctx, epoch, group_id, member_id)
            return _closing_fetch(ctx, body, group_id, ack_results, names)
        assert session is not None
        shares.sessions.advance(session, now)
    for topic in body["forgotten_topics_data"]:
        name = names[topic["topic_id"]]
        for index in topic["partitions"]:
            session.partitions.pop((name, index), None)  # type: ignore[arg-type]
    unknown: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    for topic in body["topics"]:
        name = names[topic["topic_id"]]
        for part in topic["partitions"]:
            if name is None:
                unknown[(topic["topic_id"], part["partition_index"])] = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                session.partitions[(name, part["partition_index"])] = None
    return _fetch(ctx, body, session, ack_results, unknown, names)


async def _closing_fetch(ctx, body: dict, group_id: str, ack_results: dict, names: dict) -> dict:
    await _persist_acknowledged(ctx, body, group_id, ack_results)
    return _fetch_response(ctx, body, ack_results, {}, names)


async def _fetch(ctx, body: dict, session, ack_results: dict, unknown: dict, names: dict):
    """Persist the acknowledgements, load the session's share-partitions, acquire;
    wait in the fetch purgatory when nothing was acquired."""
    shares = ctx.core.shares
    await _persist_acknowledged(ctx, body, session.group_id, ack_results)
    partitions = list(session.partitions)
    load_errors: dict = {}
    if body["max_records"] > 0:
        loadable = [p for p in partitions if _partition_error(ctx, *p) == ErrorCode.NONE]
        codes = await asyncio.gather(
            *(shares.load(session.group_id, name, index) for name, index in loadable)
        )
        load_errors = {
            key: code for key, code in zip(loadable, codes, strict=True) if code != ErrorCode.NONE
        }
    fetched = _acquire(ctx, body, session)
    fetched.update(load_errors)
    fetched.update(unknown)
    if fetched or body["max_wait_ms"] <= 0 or body["max_records"] <= 0 or not partitions:
        return _fetch_response(ctx, body, ack_results, fetched, names)
    future = asyncio.get_running_loop().create_future()
    op = DelayedShareFetch(ctx, body, session, ack_results, names, future)
    ctx.core.fetch_purgatory.try_complete_else_watch(op, partitions)
    return await future


def _acquire(ctx, body: dict, session) -> dict:
    """Acquire from every partition of the session: {(topic, index): ErrorCode, or
    (records, acquired runs)}."""
    shares = ctx.core.shares
    out: dict = {}
    if body["max_records"] <= 0:
        return out
    records_left = body["max_records"]
    bytes_left = body["max_bytes"] if body["max_bytes"] > 0 else 0x7FFFFFFF
    now = _now_ms()
    for name, index in session.partitions:
        code = _partition_error(ctx, name, index)
        if code != ErrorCode.NONE:
            out[(name, index)] = code
            continue
        if records_left <= 0 or bytes_left <= 0:
            continue
        got = shares.acquire(
            session.group_id, session.member_id, name, index, records_left, bytes_left, now
        )
        if got.acquired:
            records_left -= sum(r.last_offset - r.first_offset + 1 for r in got.acquired)
            bytes_left -= len(got.records)
            out[(name, index)] = (got.records, got.acquired)
    return out


def _fetch_response(ctx, body: dict, ack_results: dict, fetched: dict, names: dict) -> dict:
    """The ShareFetch answer: every partition named in the request (its
    acknowledgement's result) and every partition with records or an error."""
    ids = {name: topic_id for topic_id, name in names.items() if name is not None}
    parts: dict[tuple[uuid.UUID, int], dict] = {}

    def entry(topic_id: uuid.UUID, name: str | None, index: int) -> dict:
        key = (topic_id, index)
        if key not in parts:
            leader = (
                _leader(ctx, name, index)
                if name is not None
                else {"leader_id": -1, "leader_epoch": -1}
            )
            parts[key] = {
                "partition_index": index,
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "acknowledge_error_code": ErrorCode.NONE,
                "acknowledge_error_message": None,
                "current_leader": leader,
                "records": b"",
                "acquired_records": [],
            }
        return parts[key]

    for topic in body["topics"]:
        for part in topic["partitions"]:
            entry(topic["topic_id"], names.get(topic["topic_id"]), part["partition_index"])
    for (topic_id, index), code in ack_results.items():
        entry(topic_id, names.get(topic_id), index)["acknowledge_error_code"] = code
    leaders: set[int] = set()
    for (name_or_id, index), value in fetched.items():
        if isinstance(name_or_id, uuid.UUID):
            topic_id, name = name_or_id, None
        else:
            topic_id, name = ids.get(name_or_id) or _topic_id(ctx, name_or_id), name_or_id
        part = entry(topic_id, name, index)
        if isinstance(value, tuple):
            records, runs = value
            part["records"] = records
            part["acquired_records"] = [
                {
                    "first_offset": r.first_offset,
                    "last_offset": r.last_offset,
                    "delivery_count": r.delivery_count,
                }
                for r in runs
            ]
        else:
            part["error_code"] = value
            if (
                value == ErrorCode.NOT_LEADER_OR_FOLLOWER
                and part["current_leader"]["leader_id"] >= 0
            ):
                leaders.add(part["current_leader"]["leader_id"])
    by_topic: dict[uuid.UUID, list[dict]] = {}
    for (topic_id, _index), part in parts.items():
        by_topic.setdefault(topic_id, []).append(part)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "acquisition_lock_timeout_ms": (
            ctx.core.shares.group_config(body["group_id"]).share_record_lock_duration_ms
        ),
        "responses": [{"topic_id": t, "partitions": p} for t, p in by_topic.items()],
        "node_endpoints": _endpoints(ctx, leaders),
    }


class DelayedShareFetch(DelayedOperation):
    """A ShareFetch that acquired nothing, waiting for records (appended, or released
    by others) until `max_wait_ms`; owned by the fetch purgatory."""

    def __init__(self, ctx, body: dict, session, ack_results: dict, names: dict, future):
        super().__init__(body["max_wait_ms"] / 1000)
        self.ctx = ctx
        self.body = body
        self.session = session
        self.ack_results = ack_results
        self.names = names
        self.future = future
        self.fetched: dict = {}

    def _session_alive(self) -> bool:
        shares = self.ctx.core.shares
        return shares.sessions.get(self.session.group_id, self.session.member_id) is self.session

    def try_complete(self) -> bool:
        if self.future.done() or not self._session_alive():
            return self.force_complete()
        fetched = _acquire(self.ctx, self.body, self.session)
        if fetched:  # records acquired, or a partition turned to an error
            self.fetched = fetched
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self.future.done():
            return
        self.future.set_result(
            _fetch_response(self.ctx, self.body, self.ack_results, self.fetched, self.names)
        )
