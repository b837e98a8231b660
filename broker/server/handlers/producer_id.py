"""InitProducerId (v0-1): producer ids for idempotent producers.

Each call hands out a fresh producer id with epoch 0 from the broker's
`ProducerIdManager` (blocks reserved in `<data dir>/meta/producer-id-block`, so ids
stay unique across restarts). Transactions are not supported: a request with a
transactional id gets COORDINATOR_NOT_AVAILABLE, matching FindCoordinator's answer
for transaction coordinators.
"""

from broker.groups.producer_ids import ProducerIdManager
from broker.protocol import ApiKey, ErrorCode
from broker.server.dispatch import handles


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
    pid = ctx.core.extensions["producer_ids"].next_id()
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": pid,
        "producer_epoch": 0,
    }
