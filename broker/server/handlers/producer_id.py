"""InitProducerId (v0-4): producer ids for idempotent producers.

Each call hands out a fresh producer id with epoch 0, also when v3+ names the
producer's current id and epoch (Kafka does the same without a transactional id): on a single node from the
broker's `ProducerIdManager` (blocks reserved in `<data dir>/meta/producer-id-block`,
so ids stay unique across restarts), in a cluster from blocks reserved in ZooKeeper
(`broker.cluster.producer_ids`), so ids stay unique across brokers too. Transactions are not supported: a request with a
transactional id gets COORDINATOR_NOT_AVAILABLE, matching FindCoordinator's answer
for transaction coordinators.
"""

import logging

from broker.groups.producer_ids import ProducerIdManager
from broker.protocol import ApiKey, ErrorCode
from broker.server.dispatch import handles

log = logging.getLogger(__name__)


def setup(core) -> None:
    core.extensions["producer_ids"] = ProducerIdManager.for_data_dir(core.data_dir)


@handles(ApiKey.INIT_PRODUCER_ID)
def init_producer_id(ctx, body):
    if body["transactional_id"] is not None:
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    if ctx.core.cluster is not None:
        return _cluster_producer_id(ctx.core.cluster)
    return _answer(ctx.core.extensions["producer_ids"].next_id())


async def _cluster_producer_id(cluster) -> dict:
    try:
        pid = await cluster.producer_ids.next_id()
    except Exception as e:  # ZooKeeper unreachable: a retriable error for the client
        log.warning("producer id block reservation failed: %s", e)
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    return _answer(pid)


def _answer(pid: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": pid,
        "producer_epoch": 0,
    }
