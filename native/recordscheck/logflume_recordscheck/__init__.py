"""The produce path's records check in C (`_check.c`).

`broker.protocol.records._check_records` is the reference walk and the fallback where
this distribution is not installed; tests/broker/protocol/test_records_check.py holds
the two to the same answers.
"""

from logflume_recordscheck._check import check_records

__all__ = ["check_records"]
