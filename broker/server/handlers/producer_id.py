"""InitProducerId (v0-5): producer ids for idempotent and transactional producers.

Each call hands out a fresh producer id with epoch 0, also when v3+ names the
producer's current id and epoch (Kafka does the same without a transactional id): on a single node from the
broker's `ProducerIdManager` (blocks reserved in `<data dir>/meta/producer-id-block`,
so ids stay unique across restarts), in a cluster from blocks reserved in ZooKeeper
(`broker.cluster.producer_ids`), so ids stay unique across brokers too. A request with a transactional id is answered
by the transaction coordinator (handlers/transactions.py): an epoch bump that fences
older producers of the id.

Authorization as Kafka 3.x: with a transactional id WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).
"""

import logging

from broker.groups.producer_ids import ProducerIdManager
from broker.protocol import ApiKey, ErrorCode
from broker.server.authz import RT, Op, allowed, allowed_on_some
from broker.server.dispatch import handles
from broker.server.handlers import transactions

log = logging.getLogger(__name__)


def setup(core) -> None:
    core.extensions["producer_ids"] = ProducerIdManager.for_data_dir(core.data_dir)


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
    if ctx.core.cluster is not None:
        return _cluster_producer_id(ctx.core.cluster)
    return _answer(ctx.core.extensions["producer_ids"].next_id())


async def _cluster_producer_id(cluster) -> dict:
    try:
        pid = await cluster.producer_ids.next_id()
    except Exception as e:  # ZooKeeper unreachable: a retriable error for the client
        log.warning("producer id block reservation failed: %s", e)
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
