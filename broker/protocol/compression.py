"""Compression codecs of RecordBatch v2 (the `attributes` bits 0-2).

gzip and lz4 are built and read. LZ4 is the standard LZ4 *frame* format with 64 KiB
independent blocks, as Kafka writes it. snappy (xerial framing) and zstd batches are
accepted and stored byte-for-byte by the broker, which never needs their records;
asking for those records raises `UnsupportedCodecError`.
"""

import gzip
import zlib
from enum import IntEnum

import lz4.frame


class CorruptRecordError(ValueError):
    """A record batch failed a CRC, length or format check."""


class UnsupportedCodecError(CorruptRecordError):
    """The batch uses a codec this process cannot (de)compress (snappy, zstd)."""


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def compress(codec: Codec, data: bytes) -> bytes:
    if codec == Codec.NONE:
        return data
    if codec == Codec.GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == Codec.LZ4:
        return lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
    raise UnsupportedCodecError(f"cannot compress with codec {codec.name}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == Codec.NONE:
            return bytes(data)
        if codec == Codec.GZIP:
            return zlib.decompress(data, wbits=16 + zlib.MAX_WBITS)
        if codec == Codec.LZ4:
            return lz4.frame.decompress(bytes(data))
    except (zlib.error, RuntimeError, EOFError) as e:
        raise CorruptRecordError(f"cannot decompress {Codec(codec).name} records: {e}") from e
    name = Codec(codec).name if codec in Codec._value2member_map_ else str(codec)
    raise UnsupportedCodecError(f"records compressed with {name} cannot be read by this broker")


def decompress_bounded(codec: int, data: bytes | memoryview, max_size: int) -> bytes:
    """Like `decompress`, but CorruptRecordError as soon as the output would exceed
    `max_size` bytes (a small batch must not make the broker allocate gigabytes)
    or when the compressed stream is truncated."""
    try:
        if codec == Codec.GZIP:
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out = d.decompress(data, max_size + 1)
            done = d.eof
        elif codec == Codec.LZ4:
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(bytes(data), max_size + 1)
            done = d.eof
        else:
            return decompress(codec, data)
    except (zlib.error, RuntimeError, EOFError) as e:
        raise CorruptRecordError(f"cannot decompress {Codec(codec).name} records: {e}") from e
    if len(out) > max_size:
        raise CorruptRecordError(f"records decompress to more than {max_size} bytes")
    if not done:
        raise CorruptRecordError(f"{Codec(codec).name} records are truncated")
    return out
