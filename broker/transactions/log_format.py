"""The `__transaction_state` topic: which partition holds a transactional id, and
its records, in Kafka's formats so Kafka tooling can read the topic.

A transactional id lives in partition `abs(java String.hashCode(id)) % partitions`
(`transaction.state.log.num.partitions`, Kafka's formula). The topic is compacted;
the last value per key is the id's state:

    key    int16 version 0, TransactionLogKey { transactional_id string }
    value  int16 version 0, TransactionLogValue { producer_id int64,
           producer_epoch int16, transaction_timeout_ms int32, transaction_status
           int8, transaction_partitions nullable [ {topic, partition_ids} ],
           transaction_last_update_timestamp_ms int64,
           transaction_start_timestamp_ms int64 }

Version 1 of the value is the same fields in flexible encoding, with three tagged
fields of transactions v2: PreviousProducerId (0), NextProducerId (1: the id a
transaction's end moves to when the epoch ran out) and ClientTransactionVersion (2).
Both are read; version 1 is written when `transaction.version` is finalized at 1 or
more, version 0 below (Kafka's TransactionVersion.transactionLogValueVersion). A null
value is a tombstone: the id expired.
"""

from __future__ import annotations

import struct

from broker.groups.offsets_topic import partition_for as _java_hash_partition
from broker.protocol.primitives import INT16, read_string, write_string
from broker.protocol.records import BatchBuilder
from broker.protocol.schema import INT8, INT32, INT64, STRING, Array, F, compile_message
from broker.protocol.schema import INT16 as I16
from broker.transactions.state import TxnMetadata, TxnState, by_topic

DEFAULT_NUM_PARTITIONS = 50
KEY_VERSION = 0

_VALUE_FIELDS = [
    F("producer_id", INT64),
    F("previous_producer_id", INT64, "1+", default=-1, tag=0),
    F("next_producer_id", INT64, "1+", default=-1, tag=1),
    F("producer_epoch", I16),
    F("transaction_timeout_ms", INT32),
    F("transaction_status", INT8),
    F(
        "transaction_partitions",
        [F("topic", STRING), F("partition_ids", Array(INT32))],
        nullable="0+",
    ),
    F("transaction_last_update_timestamp_ms", INT64),
    F("transaction_start_timestamp_ms", INT64),
    F("client_transaction_version", I16, "1+", default=0, tag=2),
]
_VALUE_CODECS = {
    0: compile_message(_VALUE_FIELDS, 0, False),
    1: compile_message(_VALUE_FIELDS, 1, True),
}

DECODE_ERRORS = (ValueError, struct.error, KeyError)


class UnknownRecordVersion(ValueError):
    """A record of a newer Kafka this broker does not read."""


def partition_for(transactional_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    return _java_hash_partition(transactional_id, num_partitions)


def encode_key(transactional_id: str) -> bytes:
    return INT16.pack(KEY_VERSION) + write_string(transactional_id)


def decode_key(buf: bytes) -> str:
    (version,) = INT16.unpack_from(buf, 0)
    if version != KEY_VERSION:
        raise UnknownRecordVersion(f"transaction log key version {version}")
    return read_string(buf, 2)[0]


def value_version(transaction_version: int) -> int:
    """The value version Kafka writes under a finalized `transaction.version`."""
    return 1 if transaction_version >= 1 else 0


def encode_value(m: TxnMetadata, version: int = 0) -> bytes:
    """The id's state as Kafka writes it; Empty carries no partitions (null)."""
    if m.state == TxnState.EMPTY:
        partitions = None
    else:
        grouped = by_topic(sorted(m.partitions))
        partitions = [{"topic": t, "partition_ids": ps} for t, ps in grouped.items()]
    out: list = [INT16.pack(version)]
    _VALUE_CODECS[version].encode(
        {
            "producer_id": m.producer_id,
            "previous_producer_id": m.last_producer_id,
            "next_producer_id": m.next_producer_id,
            "client_transaction_version": m.client_tv,
            "producer_epoch": m.producer_epoch,
            "transaction_timeout_ms": m.txn_timeout_ms,
            "transaction_status": int(m.state),
            "transaction_partitions": partitions,
            "transaction_last_update_timestamp_ms": m.last_update_ms,
            "transaction_start_timestamp_ms": m.txn_start_ms,
        },
        out,
    )
    return b"".join(out)


def decode_value(transactional_id: str, buf: bytes) -> TxnMetadata:
    (version,) = INT16.unpack_from(buf, 0)
    codec = _VALUE_CODECS.get(version)
    if codec is None:
        raise UnknownRecordVersion(f"transaction log value version {version}")
    v, _ = codec.decode(memoryview(buf), 2)
    state = TxnState(v["transaction_status"])
    partitions: set[tuple[str, int]] = set()
    if state != TxnState.EMPTY:
        for entry in v["transaction_partitions"] or ():
            partitions.update((entry["topic"], p) for p in entry["partition_ids"])
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=v["producer_id"],
        producer_epoch=v["producer_epoch"],
        txn_timeout_ms=v["transaction_timeout_ms"],
        state=state,
        partitions=partitions,
        txn_start_ms=v["transaction_start_timestamp_ms"],
        last_update_ms=v["transaction_last_update_timestamp_ms"],
        last_producer_id=v.get("previous_producer_id", -1),
        next_producer_id=v.get("next_producer_id", -1),
        client_tv=v.get("client_transaction_version", 0),
    )


def build_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int) -> bytes:
    """One uncompressed batch (Kafka enforces no compression on this topic)."""
    builder = BatchBuilder()
    for key, value in records:
        builder.append(value, key=key, timestamp_ms=timestamp_ms)
    return builder.build()
