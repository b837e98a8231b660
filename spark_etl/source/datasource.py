"""The `logflume` PySpark data source: Spark's Kafka source, planned and written over
confluent-kafka, read with Fetch requests of its own (client.read_range).

Theory of operation
- Planning (driver): list the subscribed partitions and their watermarks, turn the
  offsets options into concrete [start, end) ranges, check them against the log
  start (failOnDataLoss), and cut them into `OffsetRange` input partitions.
- Reading (executors): `read()` fetches one range from the partition's leader and
  yields Arrow record batches (spark_etl.source.client.read_range). Nothing but
  options and numbers is pickled. Settings the reads cannot honour fail the query
  when its reader is made, before anything runs.
- Streaming: an offset is the JSON map `{topic: {"partition": next offset}}` that
  Spark writes to the checkpoint's offset log *before* running a micro-batch, and a
  batch is re-run with the same offsets after a crash, so reads are deterministic
  and a transactional sink (the file sink, or an idempotent foreachBatch) gets each
  record exactly once. `maxOffsetsPerTrigger` becomes Spark's `ReadMaxRows` default
  read limit and is spread across partitions in proportion to their backlog.
  `Trigger.AvailableNow` calls `prepareForTriggerAvailableNow`, which pins the
  current high watermarks as the target the query drains and then stops at.
  A partition whose log now ends below the checkpointed offset (truncated by an
  unclean election, or the topic recreated) fails the query (failOnDataLoss), or
  with failOnDataLoss=false is read again from its earliest offset, with a warning.
- `emit=ranges`: a read yields one row (topic, partition, start, end) per range
  instead of its records, for a job that reads each range in the task that
  processes it (`client.read_range`) so the records never cross into the JVM; the
  offsets contract above is unchanged.
- Writing: rows with `value` (and optional `key`) go to option `topic` through a
  producer with acks=all (add `kafka.enable.idempotence=true` where the broker
  supports it), flushed before the task reports success
  (at-least-once, like Spark's Kafka sink).
"""

from __future__ import annotations

import dataclasses
import logging

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from spark_etl.source import client
from spark_etl.source.options import (
    TP,
    SourceOptions,
    check_start,
    limit_offsets,
    offsets_from_json,
    offsets_to_json,
    resolve,
    split_ranges,
)

log = logging.getLogger("spark_etl.source")

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, "
    "headers array<struct<key: string, value: binary>>"
)


# SCHEMA in Arrow, as Spark hands it to Python (for readers of `emit=ranges` rows).
RECORDS_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)
# With option emit=ranges, a read yields its offset range instead of the records.
RANGES_SCHEMA = "topic string, partition int, start long, end long"


@dataclasses.dataclass
class OffsetRange(InputPartition):
    """Offsets [start, end) of one topic-partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


def _arrow_schema(schema: StructType):
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


class LogflumeDataSource(DataSource):
    """Format `logflume`: read topics like Spark's Kafka source, write a `value` column."""

    @classmethod
    def name(cls) -> str:
        return "logflume"

    def schema(self) -> str:
        emit = {k.lower(): v for k, v in self.options.items()}.get("emit", "records")
        return RANGES_SCHEMA if emit.lower() == "ranges" else SCHEMA

    def reader(self, schema: StructType) -> BatchReader:
        opts = SourceOptions.parse(self.options, streaming=False)
        client.check_read_settings(opts)
        return BatchReader(opts, schema)

    def streamReader(self, schema: StructType) -> StreamReader:
        opts = SourceOptions.parse(self.options, streaming=True)
        client.check_read_settings(opts)
        return StreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        return BatchWriter(_writer_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        return StreamWriter(_writer_options(self.options), schema)


def _writer_options(options) -> SourceOptions:
    opts = SourceOptions.parse(options, streaming=True)
    if not opts.topic_out:
        raise ValueError("logflume: option topic is required to write")
    return opts


def _read(opts: SourceOptions, schema: StructType, part: InputPartition):
    if not isinstance(part, OffsetRange):
        return  # Spark's placeholder partition when there is nothing to read
    arrow = _arrow_schema(schema)
    if opts.emit == "ranges":
        yield pa.RecordBatch.from_pylist([dataclasses.asdict(part)], schema=arrow)
        return
    yield from client.read_range(opts, (part.topic, part.partition), part.start, part.end, arrow)


def _plan(opts: SourceOptions, start: dict[TP, int], end: dict[TP, int]) -> list[OffsetRange]:
    ranges = [(tp, start.get(tp, 0), e) for tp, e in sorted(end.items())]
    return [
        OffsetRange(t, p, a, b)
        for (t, p), a, b in split_ranges(
            ranges, opts.min_partitions, opts.max_records_per_partition
        )
    ]


class BatchReader(DataSourceReader):
    """Batch read of startingOffsets..endingOffsets. Created and pickled by Spark; holds
    only options and the schema (no clients), so it is safe to ship to executors."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        self.opts = opts
        self.schema = schema

    def partitions(self) -> list[OffsetRange]:
        tps = client.topic_partitions(self.opts)
        marks = client.watermarks(self.opts, tps)
        start = resolve(self.opts.starting, tps, marks, "earliest")
        end = resolve(self.opts.ending, tps, marks, "latest")
        for tp in tps:
            low, high = marks[tp]
            start[tp] = check_start(tp, start[tp], low, high, self.opts.fail_on_data_loss, log)
            end[tp] = max(start[tp], min(end[tp], high))
        return _plan(self.opts, start, end)

    def read(self, partition: InputPartition):
        return _read(self.opts, self.schema, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Lives in Spark's driver-side Python planner process for the
    query's lifetime (single-threaded there); `read` runs on executors and uses only
    the pickled options."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        opts.require_subscription()
        self.opts = opts
        self.schema = schema
        self._target: dict[TP, int] | None = None

    def initialOffset(self) -> dict:
        tps = client.topic_partitions(self.opts)
        marks = client.watermarks(self.opts, tps)
        return offsets_to_json(resolve(self.opts.starting, tps, marks, "latest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: high for tp, (_, high) in self._marks().items()}
        log.info("logflume: AvailableNow target offsets %s", offsets_to_json(self._target))

    def _marks(self) -> dict[TP, tuple[int, int]]:
        return client.watermarks(self.opts, client.topic_partitions(self.opts))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        marks = self._marks()
        pinned = self._target or {}
        target = {}
        for tp, (low, high) in marks.items():
            begin.setdefault(tp, low)  # a partition added since the query started
            if begin[tp] > high:
                # The log now ends below the checkpoint (truncated, or the topic was
                # recreated): fail, or end this batch at `high` and let `partitions`
                # read the partition again from its start.
                if self.opts.fail_on_data_loss:
                    check_start(tp, begin[tp], low, high, True, log)
                target[tp] = high
                continue
            end = min(high, pinned.get(tp, low)) if self._target is not None else high
            target[tp] = max(end, begin[tp])
        if isinstance(limit, ReadMaxRows):
            target = limit_offsets(begin, target, limit.max_rows)
        return offsets_to_json(target)

    def reportLatestOffset(self) -> dict:
        return offsets_to_json({tp: high for tp, (_, high) in self._marks().items()})

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        begin, finish = offsets_from_json(start), offsets_from_json(end)
        marks = client.watermarks(self.opts, sorted(finish))
        for tp, (low, high) in marks.items():
            if tp not in begin:
                begin[tp] = low
            if begin[tp] < finish[tp] or begin[tp] > high:
                begin[tp] = check_start(tp, begin[tp], low, high, self.opts.fail_on_data_loss, log)
        return _plan(self.opts, begin, {tp: max(begin[tp], e) for tp, e in finish.items()})

    def read(self, partition: InputPartition):
        return _read(self.opts, self.schema, partition)

    def commit(self, end: dict) -> None:
        log.debug("logflume: committed %s", end)


@dataclasses.dataclass
class SentMessage(WriterCommitMessage):
    records: int


class BatchWriter(DataSourceArrowWriter):
    """`df.write.format("logflume").option("topic", ...)`: picklable (options only)."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        if "value" not in schema.fieldNames():
            raise ValueError("logflume: the DataFrame to write needs a `value` column")
        self.opts = opts

    def write(self, iterator) -> SentMessage:
        topic = self.opts.topic_out
        assert topic is not None  # checked by _writer_options
        return SentMessage(client.produce_batches(self.opts, topic, iterator))


class StreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("logflume")`: every task flushes (acks=all) before it
    reports success; commit only logs. Picklable (options only)."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        if "value" not in schema.fieldNames():
            raise ValueError("logflume: the DataFrame to write needs a `value` column")
        self.opts = opts

    def write(self, iterator) -> SentMessage:
        topic = self.opts.topic_out
        assert topic is not None  # checked by _writer_options
        return SentMessage(client.produce_batches(self.opts, topic, iterator))

    def commit(self, messages, batchId: int) -> None:
        sent = sum(m.records for m in messages if m is not None)
        log.info("logflume: batch %d wrote %d records to %s", batchId, sent, self.opts.topic_out)
