"""Waiting for replication: acks=all writes complete when the high watermark covers them.

`DelayedProduce` is the produce purgatory's operation (broker.server.purgatory): it
completes once every partition it waits on has its high watermark at or past the
offset after the write (`Partition.enough_replicas_for`), or with REQUEST_TIMED_OUT
for the partitions still short when it expires. On a single node the high watermark
moves with the append, so it completes at once; with replication, follower fetches
move it and wake the operation through `Partition.on_change`.

Client produces (broker.server.handlers.produce) and the broker's own writers (the
group and transaction coordinators, transaction markers) wait the same way; the
latter through `wait_replicated`.
"""

from __future__ import annotations

import asyncio

from broker.protocol import ErrorCode
from broker.server.purgatory import DelayedOperation, Purgatory


class DelayedProduce(DelayedOperation):
    """An acks=all write waiting for the high watermark; owned by the produce purgatory."""

    def __init__(self, timeout_s: float, waiting: list, response: dict, future: asyncio.Future):
        super().__init__(timeout_s)
        self.waiting = waiting  # [(partition, required offset, partition response dict)]
        self.response = response
        self.future = future

    def try_complete(self) -> bool:
        still = []
        for partition, required, resp in self.waiting:
            done, error = partition.enough_replicas_for(required)
            if not done:
                still.append((partition, required, resp))
            elif error != ErrorCode.NONE:
                resp["error_code"] = error
                resp["base_offset"] = -1
        self.waiting = still
        if still:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for _, _, resp in self.waiting:
            resp["error_code"] = ErrorCode.REQUEST_TIMED_OUT
            resp["base_offset"] = -1
        self.waiting = []
        if not self.future.done():
            self.future.set_result(self.response)


async def wait_replicated(
    purgatory: Purgatory, partition, end_offset: int, timeout_s: float
) -> ErrorCode:
    """Wait until `partition`'s high watermark reaches `end_offset` (acks=all).

    For broker-internal writers (e.g. the group coordinator appending to
    `__consumer_offsets` with `partition.append_as_leader(records, -1)`): returns
    NONE, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND or NOT_LEADER_OR_FOLLOWER.
    """
    resp = {"error_code": ErrorCode.NONE, "base_offset": 0}
    future = asyncio.get_running_loop().create_future()
    op = DelayedProduce(timeout_s, [(partition, end_offset, resp)], resp, future)
    if not purgatory.try_complete_else_watch(op, [partition.key]):
        await future
    return ErrorCode(resp["error_code"])
