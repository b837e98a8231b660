"""The share coordinator's RPCs (KIP-932), broker to broker, answered by the leader of
the share-partition's `__share_group_state` partition (broker.share.state_store):
ReadShareGroupState and WriteShareGroupState to the share-partition's leader (and a
read to the group coordinator), InitializeShareGroupState and DeleteShareGroupState
to the group coordinator (broker.share.persister). CLUSTER_ACTION on the cluster, as
Kafka's.
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import handles


def _each(body: dict):
    for topic in body["topics"]:
        for part in topic["partitions"]:
            yield topic["topic_id"], part


def _results(answers: list[tuple]) -> list[dict]:
    by_topic: dict = {}
    for topic_id, part in answers:
        by_topic.setdefault(topic_id, []).append(part)
    return [{"topic_id": t, "partitions": p} for t, p in by_topic.items()]


@handles(ApiKey.READ_SHARE_GROUP_STATE)
def read_share_group_state(ctx, body):
    denied = not allowed(ctx, Op.CLUSTER_ACTION, RT.CLUSTER)
    store = ctx.core.share_states
    answers = []
    for topic_id, part in _each(body):
        answer = {
            "partition": part["partition"],
            "error_message": None,
            "state_epoch": 0,
            "start_offset": -1,
            "state_batches": [],
        }
        if denied:
            answers.append(
                (topic_id, answer | {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED})
            )
            continue
        key = (body["group_id"], topic_id.hex, part["partition"])
        code, state = store.read(key, part["leader_epoch"])
        answer["error_code"] = code
        if state is not None:
            answer["state_epoch"] = state.state_epoch
            answer["start_offset"] = state.start_offset
            answer["state_batches"] = [
                {
                    "first_offset": first,
                    "last_offset": last,
                    "delivery_state": delivery_state,
                    "delivery_count": count,
                }
                for first, last, delivery_state, count in state.batches
            ]
        answers.append((topic_id, answer))
    return {"results": _results(answers)}


@handles(ApiKey.WRITE_SHARE_GROUP_STATE)
def write_share_group_state(ctx, body):
    if not allowed(ctx, Op.CLUSTER_ACTION, RT.CLUSTER):
        return {
            "results": _results(
                [
                    (
                        topic_id,
                        {
                            "partition": part["partition"],
                            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            "error_message": None,
                        },
                    )
                    for topic_id, part in _each(body)
                ]
            )
        }
    return _write(ctx, body)


async def _write(ctx, body: dict) -> dict:
    store = ctx.core.share_states
    answers = []
    for topic_id, part in _each(body):
        key = (body["group_id"], topic_id.hex, part["partition"])
        batches = [
            (b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
            for b in part["state_batches"]
        ]
        code = await store.write(
            key, part["state_epoch"], part["leader_epoch"], part["start_offset"], batches
        )
        answers.append(
            (topic_id, {"partition": part["partition"], "error_code": code, "error_message": None})
        )
    return {"results": _results(answers)}


@handles(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
def initialize_share_group_state(ctx, body):
    store = ctx.core.share_states
    return _each_partition(
        ctx,
        body,
        lambda key, part: store.initialize(key, part["state_epoch"], part["start_offset"]),
    )


@handles(ApiKey.DELETE_SHARE_GROUP_STATE)
def delete_share_group_state(ctx, body):
    store = ctx.core.share_states
    return _each_partition(ctx, body, lambda key, part: store.delete(key))


async def _each_partition(ctx, body: dict, call) -> dict:
    """`await call(state key, partition)` for each partition named, answered with its
    error code; CLUSTER_AUTHORIZATION_FAILED for all without CLUSTER_ACTION."""
    denied = not allowed(ctx, Op.CLUSTER_ACTION, RT.CLUSTER)
    answers = []
    for topic_id, part in _each(body):
        if denied:
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        else:
            code = await call((body["group_id"], topic_id.hex, part["partition"]), part)
        answers.append(
            (topic_id, {"partition": part["partition"], "error_code": code, "error_message": None})
        )
    return {"results": _results(answers)}
