"""logflume's hot record walks in C.

- `check_records` (`_check.c`): the produce path's records check.
  `broker.protocol.records._check_records` is the reference walk and the fallback where
  this distribution is not installed; tests/broker/protocol/test_records_check.py holds
  the two to the same answers.
- `decode_batches` (`_decode.c`): the Spark source's records into Arrow buffers
  (spark_etl/source/batches.py), with `xxh64`, the audit's hash of each value.
"""

from logflume_recordscheck._check import check_records, decode_batches, xxh64

__all__ = ["check_records", "decode_batches", "xxh64"]
