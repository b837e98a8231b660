"""The independent reference the Spark source's reads are checked against: what
confluent-kafka's consume() makes of the same records, turned into the source's Arrow
columns as the source itself did before it fetched and decoded record sets
(`spark_etl/source/batches.py`). librdkafka decodes the batches here, so a test
comparing the two compares two decoders written apart."""

from __future__ import annotations

import bisect
from itertools import repeat
from operator import itemgetter

from common.audit import HASH_SEED
from spark_etl.source.batches import VALUE_HASH

# librdkafka timestamp types (0 none, 1 create, 2 log append), as list indexes ->
# Kafka's timestampType (0 CreateTime, 1 LogAppendTime; -1 for none)
_NO_TIMESTAMP = 0
_TS_TYPE = [-1, 0, 1]


def consume_range(bootstrap: str, topic: str, partition: int, end: int, schema, isolation: str):
    """The records of [0, end) of one partition, read by a confluent-kafka Consumer, as
    one Arrow table in `schema`."""
    import pyarrow as pa
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reference",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    batches, pos = [], 0
    try:
        while pos < end:
            msgs = consumer.consume(1000, timeout=5)
            assert msgs, f"no records from {topic}-{partition} at {pos} (want {end})"
            run = [m for m in msgs if m.error() is None]
            if run:
                batch, pos = messages_to_arrow(run, topic, partition, end, schema)
                batches.append(batch)
            for m in msgs:
                if m.error() is None:
                    continue
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(m.error())
                pos = max(pos, end)  # the (stable) end: the rest are markers or aborted
    finally:
        consumer.close()
    return pa.Table.from_batches(batches, schema)


def messages_to_arrow(run: list, topic: str, partition: int, end: int, arrow_schema):
    """(RecordBatch of the records of `run` below `end`, next position).

    Column-wise: each column is one `map` of an unbound `Message` method over the run
    (about 30 ns a record) handed to pyarrow whole; offsets are a range when the run
    is contiguous (the usual case: gaps only come from compaction and transaction
    markers), timestamps are converted by Arrow kernels, and absent headers are one
    all-null column.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from confluent_kafka import Message

    first, last = run[0].offset(), run[-1].offset()
    if last - first == len(run) - 1:
        if last >= end:
            run, last = run[: max(0, end - first)], end - 1
        offsets = pa.array(np.arange(first, last + 1, dtype=np.int64))
    else:
        listed = list(map(Message.offset, run))
        if last >= end:
            # a consumed message has an offset: the stub's None is for produced ones
            cut = bisect.bisect_left(listed, end)  # type: ignore[type-var]
            run, listed = run[:cut], listed[:cut]
        offsets = pa.array(listed, pa.int64())
    n = len(run)
    nxt = min(last + 1, end)
    if not n:
        return pa.RecordBatch.from_pylist([], schema=arrow_schema), nxt
    pairs = list(map(Message.timestamp, run))
    kinds = list(map(itemgetter(0), pairs))
    ts_type = arrow_schema.field("timestamp").type
    stamps = (
        pa.array(list(map(itemgetter(1), pairs)), pa.int64())
        .cast(pa.timestamp("ms", tz=ts_type.tz))
        .cast(ts_type)
    )
    if _NO_TIMESTAMP in kinds:
        stamps = pc.if_else(pa.array([k == _NO_TIMESTAMP for k in kinds]), None, stamps)
    headers_type = arrow_schema.field("headers").type
    headers = list(map(Message.headers, run))
    if any(headers):
        headers = pa.array(
            # consumed headers are (key, value) pairs: the stub's dict is for producing
            [[{"key": k, "value": v} for k, v in h] if h else None for h in headers],  # type: ignore[str-unpack]
            headers_type,
        )
    else:
        headers = pa.nulls(n, headers_type)
    values = list(map(Message.value, run))
    value_column = pa.array(values, pa.binary())
    columns = [
        pa.array(list(map(Message.key, run)), pa.binary()),
        value_column,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        offsets,
        stamps,
        pc.take(pa.array(_TS_TYPE, pa.int32()), pa.array(kinds, pa.int8())),
        headers,
    ]
    if arrow_schema.get_field_index(VALUE_HASH) >= 0:
        columns.append(value_hashes(values, value_column.null_count > 0))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema), nxt


def value_hashes(values: list[bytes | None], nulls: bool):
    """VALUE_HASH of each value (`nulls`: whether any is None)."""
    import numpy as np
    import pyarrow as pa
    import xxhash

    present = [b"" if v is None else v for v in values] if nulls else values
    hashes = np.fromiter(
        map(xxhash.xxh64_intdigest, present, repeat(HASH_SEED)),  # type: ignore[arg-type]
        np.uint64,
        len(values),
    )
    return pa.array(hashes.view(np.int64))
