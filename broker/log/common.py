"""Small shared pieces of the log: errors, result types, file naming."""

import io
import os
from dataclasses import dataclass
from pathlib import Path

from broker.protocol.errors import ApiError, ErrorCode

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"


class RecordTooLargeError(ApiError):
    """A batch is larger than max.message.bytes."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.MESSAGE_TOO_LARGE, message)


class CorruptBatchError(ApiError):
    """A produced batch fails the CRC, size or records check, or several idempotent
    batches come in one append (Kafka's CorruptRecordException)."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.CORRUPT_MESSAGE, message)


class RecordValidationError(ApiError):
    """Records of a produced batch break a rule of their topic (Kafka's
    RecordValidationException). `record_errors` holds (index of the record in its
    batch, message) for each of them: Produce v8+ answers them per record."""

    def __init__(self, code: ErrorCode, record_errors: list[tuple[int, str]]):
        shown = "; ".join(message for _, message in record_errors[:3])
        super().__init__(
            code,
            f"{len(record_errors)} record(s) rejected, the first at most three: {shown}",
        )
        self.record_errors = record_errors


class OffsetOutOfRangeError(ValueError):
    """The requested offset lies outside [log_start_offset, log_end_offset]."""


class InvalidOffsetError(ValueError):
    """A follower append whose offsets do not follow the log end."""


@dataclass
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int
    num_batches: int
    size: int


class SegmentFile(io.FileIO):
    """The open `.log` file of a segment. When a segment is deleted or replaced while
    fetch slices still point at it, the segment drops its reference instead of closing,
    and the file closes when the last slice is garbage-collected (the unlinked inode
    stays readable until then)."""

    def __del__(self):
        if not self.closed:
            super().close()


@dataclass
class FetchSlice:
    """Whole batches at [position, position + length) of `file`. Use os.sendfile /
    loop.sendfile with the explicit offset, or read_bytes(); the file object is shared
    by every reader of the segment, so do not rely on its current position. As a
    Fetch response's `records` value it is sized (len() = length) and keeps the
    segment's file object alive while queued, so a segment deleted by retention
    meanwhile stays readable."""

    file: SegmentFile
    position: int
    length: int
    end_offset: int  # the offset after the slice's last batch

    def __len__(self) -> int:
        return self.length

    def read_bytes(self) -> bytes:
        data = os.pread(self.file.fileno(), self.length, self.position)
        if len(data) != self.length:
            raise OSError(f"short read: {len(data)} of {self.length} bytes")
        return data


def segment_path(dir: Path, base_offset: int, suffix: str) -> Path:
    return dir / f"{base_offset:020d}{suffix}"
