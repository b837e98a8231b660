"""PartitionOffsetsStore turns every refusal of the partition or its log into a
StoreError carrying the code, which the coordinator maps as Kafka's storeGroup does."""

import errno

import pytest

from broker.cluster.partition import PartitionError
from broker.groups.storage import PartitionOffsetsStore, StoreError
from broker.groups.writer import RecordWriter
from broker.log.common import RecordTooLargeError
from broker.protocol.errors import ErrorCode


class RefusingPartition:
    def __init__(self, exc: Exception):
        self.exc = exc

    def append_as_leader(self, records, required_acks):
        raise self.exc


async def never_called(partition, end_offset):
    raise AssertionError("nothing was appended, nothing to wait for")


@pytest.mark.parametrize(
    "exc, code",
    [
        (PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (RecordTooLargeError("too big"), ErrorCode.MESSAGE_TOO_LARGE),
        (OSError(errno.ENOSPC, "No space left on device"), ErrorCode.KAFKA_STORAGE_ERROR),
    ],
)
async def test_refusals_become_store_errors_with_their_code(exc, code):
    store = PartitionOffsetsStore(lambda i: RefusingPartition(exc), never_called)
    with pytest.raises(StoreError) as caught:
        await store.append(0, b"batch")
    assert caught.value.code == code


@pytest.mark.parametrize(
    "code, answer",
    [
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    ],
)
async def test_the_writer_answers_as_kafkas_store_group(code, answer):
    class Failing:
        async def append(self, partition, records):
            raise StoreError(code)

    writer = RecordWriter(Failing(), 50)
    assert await writer._append(0, [(b"k", b"v")], 0) == answer
