"""A share-partition leader's way to its durable state: reads and writes of the
share coordinator (broker.share.state_store) of each share-partition, on this broker
(a call) or on the broker leading its `__share_group_state` partition
(ReadShareGroupState / WriteShareGroupState over the inter-broker channels), as
Kafka's DefaultStatePersister does.

The group coordinator uses it too, for the admin APIs: a read at leader epoch -1
(never fenced), `initialize` (InitializeShareGroupState: AlterShareGroupOffsets) and
`delete` (DeleteShareGroupState: DeleteGroups, DeleteShareGroupOffsets).

A call that meets a moving coordinator (NOT_COORDINATOR, no leader yet, a lost
connection) is retried until `timeout_s`; `__share_group_state` is created on first
use. Event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from broker.protocol import ApiKey, ErrorCode, ProtocolError
from broker.share.state_store import Batch, ShareState, ShareStateStore

log = logging.getLogger(__name__)

_RETRIABLE = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
}


class SharePersister:
    def __init__(
        self,
        local: ShareStateStore,
        broker_id: int,
        leader_of: Callable[[int], int],
        request: Callable,
        ensure_topic: Callable[[], ErrorCode],
        timeout_s: float = 15.0,
    ) -> None:
        """`leader_of(index)`: the leader of `__share_group_state` partition `index`
        (-1: none); `await request(broker_id, api_key, version, body)`: an
        inter-broker request; `ensure_topic()`: create the topic if it is missing."""
        self.local = local
        self.broker_id = broker_id
        self.leader_of = leader_of
        self.request = request
        self.ensure_topic = ensure_topic
        self.timeout_s = timeout_s

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> tuple[ErrorCode, ShareState | None]:
        key = (group_id, topic_id.hex, partition)
        result: tuple[ErrorCode, ShareState | None] = (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            leader = self._coordinator(key)
            if leader == self.broker_id:
                result = self.local.read(key, leader_epoch)
            elif leader >= 0:
                result = await self._remote_read(leader, key, topic_id, leader_epoch)
            if result[0] not in _RETRIABLE:
                return result
            await asyncio.sleep(0.2)
        return result

    async def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[Batch],
    ) -> ErrorCode:
        key = (group_id, topic_id.hex, partition)
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            leader = self._coordinator(key)
            if leader == self.broker_id:
                code = await self.local.write(key, state_epoch, leader_epoch, start_offset, batches)
            elif leader >= 0:
                body = {
                    "group_id": group_id,
                    "topics": [
                        {
                            "topic_id": topic_id,
                            "partitions": [
                                {
                                    "partition": partition,
                                    "state_epoch": state_epoch,
                                    "leader_epoch": leader_epoch,
                                    "start_offset": start_offset,
                                    "state_batches": [_wire(b) for b in batches],
                                }
                            ],
                        }
                    ],
                }
                answer = await self._call(leader, ApiKey.WRITE_SHARE_GROUP_STATE, body)
                code = _first_code(answer)
            if code not in _RETRIABLE:
                return code
            await asyncio.sleep(0.2)
        return code

    async def initialize(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start: int
    ) -> ErrorCode:
        """InitializeShareGroupState: a fresh state of `state_epoch` at `start`."""
        part = {"partition": partition, "state_epoch": state_epoch, "start_offset": start}
        return await self._admin(
            (group_id, topic_id.hex, partition),
            lambda key: self.local.initialize(key, state_epoch, start),
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            {"group_id": group_id, "topics": [{"topic_id": topic_id, "partitions": [part]}]},
        )

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        """DeleteShareGroupState: the share-partition's state is forgotten."""
        part = {"partition": partition}
        return await self._admin(
            (group_id, topic_id.hex, partition),
            self.local.delete,
            ApiKey.DELETE_SHARE_GROUP_STATE,
            {"group_id": group_id, "topics": [{"topic_id": topic_id, "partitions": [part]}]},
        )

    async def _admin(
        self,
        key: tuple[str, str, int],
        local: Callable[[tuple[str, str, int]], Awaitable[ErrorCode]],
        api_key: ApiKey,
        body: dict,
    ) -> ErrorCode:
        """One share-partition's call of the group coordinator: `local(key)` here, else
        `api_key` to the share coordinator; retried as reads and writes are."""
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            leader = self._coordinator(key)
            if leader == self.broker_id:
                code = await local(key)
            elif leader >= 0:
                code = _first_code(await self._call(leader, api_key, body))
            if code not in _RETRIABLE:
                return code
            await asyncio.sleep(0.2)
        return code

    def _coordinator(self, key: tuple[str, str, int]) -> int:
        if self.ensure_topic() != ErrorCode.NONE:
            return -1
        try:
            return self.leader_of(self.local.partition_for(key))
        except Exception:  # the topic is not in the cluster view yet
            return -1

    async def _remote_read(
        self, leader: int, key, topic_id: uuid.UUID, leader_epoch: int
    ) -> tuple[ErrorCode, ShareState | None]:
        body = {
            "group_id": key[0],
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [{"partition": key[2], "leader_epoch": leader_epoch}],
                }
            ],
        }
        answer = await self._call(leader, ApiKey.READ_SHARE_GROUP_STATE, body)
        code = _first_code(answer)
        if code != ErrorCode.NONE or answer is None:
            return code, None
        part = answer["results"][0]["partitions"][0]
        batches = [
            (b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
            for b in part["state_batches"]
        ]
        return code, ShareState(part["state_epoch"], leader_epoch, part["start_offset"], batches)

    async def _call(self, leader: int, api_key: ApiKey, body: dict) -> dict | None:
        try:
            return await self.request(leader, api_key, 0, body)
        except (TimeoutError, OSError, LookupError, ProtocolError) as e:
            log.debug("share coordinator %d unreachable: %s", leader, e)
            return None


def _wire(batch: Batch) -> dict:
    first, last, state, count = batch
    return {
        "first_offset": first,
        "last_offset": last,
        "delivery_state": state,
        "delivery_count": count,
    }


def _first_code(answer: dict | None) -> ErrorCode:
    if answer is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    try:
        return ErrorCode(answer["results"][0]["partitions"][0]["error_code"])
    except (IndexError, KeyError, ValueError):
        return ErrorCode.UNKNOWN_SERVER_ERROR
