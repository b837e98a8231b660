"""InitProducerId (v0-5): producer ids for idempotent and transactional producers.

Each call hands out a fresh producer id with epoch 0, also when v3+ names the
producer's current id and epoch (Kafka does the same without a transactional id),
from the broker's producer-id allocator (`core.producer_ids`,
broker/cluster/producer_ids.py: blocks reserved in a file on a single node, in
ZooKeeper in a cluster, so ids stay unique across restarts and brokers); a block
that cannot be reserved answers COORDINATOR_NOT_AVAILABLE. A request with a
transactional id is answered by the transaction coordinator
(handlers/transactions.py): an epoch bump that fences older producers of the id.

Authorization as Kafka 3.x: with a transactional id WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).
"""

from broker.cluster.producer_ids import ProducerIdsUnavailable
from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed, allowed_on_some
from broker.server.dispatch import handles
from broker.server.handlers import transactions


@handles(ApiKey.INIT_PRODUCER_ID)
def init_producer_id(ctx, body):
    tid = body["transactional_id"]
    if tid is not None and not allowed(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, tid):
        return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if tid is not None:
        return transactions.init_producer_id(ctx, body)
    if not (
        allowed(ctx, Op.IDEMPOTENT_WRITE, RT.CLUSTER) or allowed_on_some(ctx, Op.WRITE, RT.TOPIC)
    ):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return _next_producer_id(ctx.core.producer_ids)


async def _next_producer_id(producer_ids) -> dict:
    try:
        pid = await producer_ids.next_id()
    except ProducerIdsUnavailable:  # a retriable error for the client
        return _refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return _answer(pid)


def _refused(code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


def _answer(pid: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": pid,
        "producer_epoch": 0,
    }
