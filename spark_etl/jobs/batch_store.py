"""One offline micro-batch's rows, parsed and stored in one pass in the Python worker.

`BatchStore` is the function `mapInArrow` runs over a micro-batch of the `logflume`
source read with `emit=ranges`: one call per Spark task, whose input is its offset
range. It reads the range from the broker itself (`client.read_range`), parses the
lines (`access_log.parse_batch`), appends the accepted rows to one Parquet file per
hour, the unparsable ones to one rejects file, and keeps the columns the hour's
partials need; at the end of the task it writes the partials (`hour_parts`) of each
hour and yields only a summary (rows, offsets, hours). So the records never cross
into the JVM (reading them through Spark and handing them to `mapInArrow` cost more
JVM time than the parse itself), and nothing is cached or shuffled.

Files are named by batch id and task (the index of the offset range in the batch),
so a re-run of a batch with the same offsets writes the same files again:

    <output>/parsed/date=D/hour=H/batch=B/part-<task>.parquet
    <output>/rejects/batch=B/part-<task>.parquet
    <output>/partials/<kind>/date=D/hour=H/batch=B/part-<task>.parquet

Each file is written under a hidden name (readers skip names starting with `.`)
and renamed into place when complete. The driver (`offline._Batch`) removes files
of the batch that this attempt did not write (`stale_files`).
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from spark_etl import access_log, audit
from spark_etl.jobs import hour_parts
from spark_etl.source import client
from spark_etl.source.batches import VALUE_HASH
from spark_etl.source.datasource import RECORDS_ARROW_SCHEMA
from spark_etl.source.options import SourceOptions

SUMMARY_SCHEMA = pa.schema(
    [
        ("task", pa.int32()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("parse_ok", pa.bool_()),
        ("hour_key", pa.int64()),  # hour_parts.hour_keys; null for unparsable rows
        ("record_host", pa.string()),  # the audit's bucket (spark_etl/audit.py)
        ("record_minute", pa.int64()),
        ("n", pa.int64()),
        ("lo", pa.int64()),
        ("hi", pa.int64()),
        ("hash_hi", pa.int64()),
        ("hash_lo", pa.int64()),
    ]
)
SUMMARY_KEYS = ["topic", "partition", "parse_ok", "hour_key", "record_host", "record_minute"]
# Rows per parse call: the parse's few dozen Arrow kernels cost ~1.3 us a line less
# over 100,000 rows than over the reader's batches of 10,000.
PARSE_BATCH = 100_000
REJECT_COLUMNS = ("topic", "partition", "offset", "ingest_time", "raw")
# Columns of increasing or clustered integers (offsets, times), delta-encoded in the
# stored files rather than dictionary-encoded: a sixth less CPU to write a row, and
# files about half the size.
DELTA_COLUMNS = ("offset", "time", "ingest_time")
# The records as read: with their values' audit checksums, hashed as they are read.
READ_SCHEMA = RECORDS_ARROW_SCHEMA.append(pa.field(VALUE_HASH, pa.int64()))


def filesystem(output: str) -> tuple[pafs.FileSystem, str]:
    """The file system and root path of an output URI or local path. The files are
    written by pyarrow, so the URI is one of pyarrow's (hdfs://, s3://, gs://);
    Hadoop's `s3a://` names the same S3 objects as `s3://` and is read as such."""
    if "://" not in output:
        return pafs.LocalFileSystem(), posixpath.abspath(output)
    if output.startswith("s3a://"):
        output = "s3://" + output[len("s3a://") :]
    try:
        return pafs.FileSystem.from_uri(output)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ValueError(
            f"--output {output}: not a file system pyarrow can write ({e}); "
            "use a local path, hdfs://, s3:// or gs://"
        ) from None


def absolute(output: str) -> str:
    """`output` with a local path made absolute, as the driver sees it. The tasks that
    write under it run in the executors' working directories (on a cluster, an
    executor's own directory under its worker's), where a relative path would put
    each executor's files apart from the others' and the driver's."""
    return output if "://" in output else posixpath.abspath(output)


def hour_dir(date: str, hour: int) -> str:
    return f"date={date}/hour={hour}"


def part_name(task: int) -> str:
    return f"part-{task:05d}.parquet"


def parsed_file(root: str, batch_id: int, hour_key: int, task: int) -> str:
    return f"{root}/parsed/{hour_dir(*hour_parts.hour_name(hour_key))}/batch={batch_id}/{part_name(task)}"


def reject_file(root: str, batch_id: int, task: int) -> str:
    return f"{root}/rejects/batch={batch_id}/{part_name(task)}"


def partial_file(root: str, kind: str, batch_id: int, hour_key: int, task: int) -> str:
    where = hour_dir(*hour_parts.hour_name(hour_key))
    return f"{root}/partials/{kind}/{where}/batch={batch_id}/{part_name(task)}"


class _File:
    """A Parquet file written under a hidden name, renamed into place by `close`."""

    def __init__(self, fs: pafs.FileSystem, path: str, schema: pa.Schema):
        head, tail = posixpath.split(path)
        fs.create_dir(head, recursive=True)
        self.fs, self.path, self.temp = fs, path, f"{head}/.{tail}.tmp"
        self.writer = pq.ParquetWriter(self.temp, schema, filesystem=fs, **_encodings(schema))
        self.open = True

    def write(self, table: pa.Table | pa.RecordBatch) -> None:
        self.writer.write(table)

    def close(self) -> None:
        self.writer.close()
        self.open = False
        self.fs.move(self.temp, self.path)

    def abort(self) -> None:
        """Drop the unfinished file (a failed task; its retry writes it again)."""
        if self.open:
            self.writer.close()
            self.open = False
            self.fs.delete_file(self.temp)


def _encodings(schema: pa.Schema) -> dict:
    """ParquetWriter's encoding options: DELTA_COLUMNS delta-encoded, others as usual."""
    delta = [c for c in DELTA_COLUMNS if c in schema.names]
    if not delta:
        return {}
    return {
        "use_dictionary": [c for c in schema.names if c not in delta],
        "column_encoding": dict.fromkeys(delta, "DELTA_BINARY_PACKED"),
    }


def write_table(fs: pafs.FileSystem, path: str, table: pa.Table) -> None:
    f = _File(fs, path, table.schema)
    f.write(table)
    f.close()


class BatchStore:
    """mapInArrow's function for micro-batch `batch_id` (picklable: two fields)."""

    def __init__(self, output: str, batch_id: int, source: SourceOptions):
        self.output = output
        self.batch_id = batch_id
        self.source = source

    def __call__(self, ranges: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        fs, root = filesystem(self.output)
        files: dict[object, _File] = {}
        rows: defaultdict[int, list[pa.Table]] = defaultdict(list)  # hour key -> ROW_COLUMNS tables
        summaries = []
        try:
            for batch in _rebatched(self._records(ranges)):
                parsed = access_log.parse_batch(batch)
                audited = audit.audit_columns(batch)
                summaries.append(self._one(fs, root, task, parsed, audited, files, rows))
            for f in files.values():
                f.close()
            for key, tables in rows.items():
                parts = hour_parts.partials(pa.concat_tables(tables))
                for kind, table in parts.items():
                    path = partial_file(root, kind, self.batch_id, key, task)
                    write_table(fs, path, table)
        except BaseException:
            for f in files.values():
                f.abort()
            raise
        yield from _summary(task, summaries).to_batches()

    def _records(self, ranges: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The records of the task's offset ranges (rows of the source's `emit=ranges`)."""
        for batch in ranges:
            for r in batch.to_pylist():
                tp = (r["topic"], r["partition"])
                yield from client.read_range(self.source, tp, r["start"], r["end"], READ_SCHEMA)

    def _one(self, fs, root, task, parsed: pa.RecordBatch, audited, files, rows) -> pa.Table:
        ok = parsed.column("parse_ok")
        keys = np.where(ok.to_numpy(zero_copy_only=False), hour_parts.hour_keys(parsed["time"]), -1)
        stored = parsed.drop_columns(["parse_ok", "raw"])
        for key in np.unique(keys).tolist():
            if key < 0:
                continue
            mine = stored.filter(pa.array(keys == key))
            if key not in files:
                files[key] = _File(fs, parsed_file(root, self.batch_id, key, task), mine.schema)
            files[key].write(mine)
            rows[key].append(pa.Table.from_batches([mine.select(hour_parts.ROW_COLUMNS)]))
        bad = parsed.filter(pc.invert(ok))
        if bad.num_rows:
            rejects = bad.select([c for c in REJECT_COLUMNS if c in bad.schema.names])
            if "rejects" not in files:
                path = reject_file(root, self.batch_id, task)
                files["rejects"] = _File(fs, path, rejects.schema)
            files["rejects"].write(rejects)
        hash_hi, hash_lo = audit.hash_halves(audited["value_hash"])
        table = pa.table(
            {
                "topic": parsed["topic"],
                "partition": parsed["partition"],
                "parse_ok": ok,
                "hour_key": pa.array(keys, mask=keys < 0),
                "record_host": audited["record_host"],
                "record_minute": audited["record_minute"],
                "offset": parsed["offset"],
                "hash_hi": hash_hi,
                "hash_lo": hash_lo,
            }
        )
        return table.group_by(SUMMARY_KEYS).aggregate(
            [
                ([], "count_all"),
                ("offset", "min"),
                ("offset", "max"),
                ("hash_hi", "sum"),
                ("hash_lo", "sum"),
            ]
        )


def _rebatched(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`batches` regrouped into batches of about PARSE_BATCH rows."""
    pending, size = [], 0
    for batch in batches:
        pending.append(batch)
        size += batch.num_rows
        if size >= PARSE_BATCH:
            yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
            pending, size = [], 0
    if size:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def _summary(task: int, parts: list[pa.Table]) -> pa.Table:
    if not parts:
        return SUMMARY_SCHEMA.empty_table()
    merged = (
        pa.concat_tables(parts)
        .group_by(SUMMARY_KEYS, use_threads=False)
        .aggregate(
            [
                ("count_all", "sum"),
                ("offset_min", "min"),
                ("offset_max", "max"),
                ("hash_hi_sum", "sum"),
                ("hash_lo_sum", "sum"),
            ]
        )
    )
    return pa.table(
        {
            "task": pa.array(np.full(merged.num_rows, task, np.int32)),
            **{k: merged[k] for k in SUMMARY_KEYS},
            "n": merged["count_all_sum"],
            "lo": merged["offset_min_min"],
            "hi": merged["offset_max_max"],
            "hash_hi": merged["hash_hi_sum_sum"],
            "hash_lo": merged["hash_lo_sum_sum"],
        }
    ).cast(SUMMARY_SCHEMA)
