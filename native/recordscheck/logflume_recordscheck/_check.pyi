"""Types of the C extension built from _check.c and _decode.c, for the type check."""

from _typeshed import ReadableBuffer

def check_records(data: ReadableBuffer, count: int, last_offset_delta: int, /) -> None: ...

# (records section, records_count, base_offset, base_timestamp, max_timestamp,
#  log_append_time)
_Part = tuple[ReadableBuffer, int, int, int, int, bool]
# list offsets, list validity, null lists, headers, key offsets, keys, value offsets,
# values, value validity, null values
_Headers = tuple[bytes, bytes, int, int, bytes, bytes, bytes, bytes, bytes, int]

def decode_batches(
    parts: list[_Part],
    start: int,
    end: int,
    want_hash: bool,
    seed: int,
    want_headers: bool,
    /,
) -> tuple[
    int,  # records
    bytes,  # offsets, int64
    bytes,  # timestamps (ms), int64
    bytes,  # timestamp types, int32
    bytes,  # key offsets, int32
    bytes,  # keys
    bytes | None,  # key validity (None: no null key)
    int,  # null keys
    bytes,  # value offsets, int32
    bytes,  # values
    bytes | None,  # value validity
    int,  # null values
    bytes | None,  # XXH64 of each value (want_hash), uint64
    _Headers | None,  # None: no record has headers (or not wanted)
]: ...
def xxh64(data: ReadableBuffer, seed: int = 0, /) -> int: ...
