"""Types of the C extension built from _check.c, for the type check."""

from _typeshed import ReadableBuffer

def check_records(data: ReadableBuffer, count: int, last_offset_delta: int, /) -> None: ...
