"""A log stand-in for Partition tests: appends only move the log end offset."""

from broker.log import AppendInfo


class FakeLog:
    def __init__(self):
        self.log_start_offset = 0
        self.log_end_offset = 0

    def append(self, records, leader_epoch=0, guard=None):
        first = self.log_end_offset
        self.log_end_offset += len(records)
        return AppendInfo(first, self.log_end_offset - 1, -1, -1, 1, len(records))

    def first_unstable_offset(self, high_watermark):
        return None  # no transactions here
