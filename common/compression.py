"""Compression codecs of RecordBatch v2 (the `attributes` bits 0-2): all of Kafka's.

The broker's (produce, down-conversion, telemetry payloads) and the Spark data
source's (`spark_etl/source/batches.py`, fetched batches): one module for both.

- gzip: a gzip member (zlib).
- snappy: written with the xerial framing that Kafka's Java producer uses (a 16-byte
  header, then blocks of at most 32 KiB, each a 4-byte length and a raw snappy
  block); read in that framing or as one raw snappy block, which librdkafka and other
  clients write (Kafka reads both).
- lz4: the standard LZ4 *frame* format with 64 KiB independent blocks, as Kafka
  writes it.
- zstd: one zstd frame (the `zstandard` library, which can bound its output).

`decompress_bounded` never lets a small batch make the broker allocate more than its
bound: snappy and zstd declare sizes up front and are checked before decompressing,
gzip and lz4 stream to the bound.
"""

import gzip
import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard


class CorruptRecordError(ValueError):
    """A record batch failed a CRC, length, codec or format check."""


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_MAGIC = XERIAL_HEADER[:8]
_XERIAL_BLOCK = 32 * 1024
_I32 = struct.Struct(">i")
_ZSTD = zstandard.ZstdDecompressor()
_ZSTD_COMPRESSOR = zstandard.ZstdCompressor(level=3)


def compress(codec: Codec, data: bytes) -> bytes:
    if codec == Codec.NONE:
        return data
    if codec == Codec.GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == Codec.SNAPPY:
        return _snappy_xerial(data)
    if codec == Codec.LZ4:
        return lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
    if codec == Codec.ZSTD:
        return _ZSTD_COMPRESSOR.compress(data)
    raise CorruptRecordError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The decompressed records section, however large."""
    return decompress_bounded(codec, data, None)


def decompress_bounded(codec: int, data: bytes | memoryview, max_size: int | None) -> bytes:
    """Like `decompress`, but CorruptRecordError as soon as the output would exceed
    `max_size` bytes (a small batch must not make the broker allocate gigabytes)
    or when the compressed stream is truncated or corrupt."""
    name = Codec(codec).name if codec in Codec._value2member_map_ else str(codec)
    try:
        if codec == Codec.NONE:
            out, done = bytes(data), True
        elif codec == Codec.GZIP:
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out = d.decompress(data, 0 if max_size is None else max_size + 1)
            done = d.eof
        elif codec == Codec.SNAPPY:
            out, done = _snappy_decompress(bytes(data), max_size), True
        elif codec == Codec.LZ4:
            out, done = _lz4_decompress(bytes(data), max_size)
        elif codec == Codec.ZSTD:
            out, done = _zstd_decompress(bytes(data), max_size), True
        else:
            raise CorruptRecordError(f"unknown compression codec {codec}")
    except (zlib.error, RuntimeError, EOFError, cramjam.DecompressionError) as e:
        raise CorruptRecordError(f"cannot decompress {name} records: {e}") from e
    except zstandard.ZstdError as e:
        raise CorruptRecordError(f"cannot decompress {name} records: {e}") from e
    if max_size is not None and len(out) > max_size:
        raise CorruptRecordError(f"records decompress to more than {max_size} bytes")
    if not done:
        raise CorruptRecordError(f"cannot decompress {name} records: the stream is truncated")
    return out


def _lz4_decompress(data: bytes, max_size: int | None) -> tuple[bytes, bool]:
    """(output, whether the frame ended). The decompressor allocates the whole limit
    it is given, so the output grows in doubling steps up to `max_size` + 1 (a
    64 MiB limit at once would cost more than decompressing a 16 KB batch)."""
    d = lz4.frame.LZ4FrameDecompressor()
    if max_size is None:
        return d.decompress(data), d.eof
    step = len(data) * 4 + 65536
    chunks = [d.decompress(data, min(step, max_size + 1))]
    total = len(chunks[0])
    while not d.eof and not d.needs_input and total <= max_size:
        step *= 2
        chunks.append(d.decompress(b"", min(step, max_size + 1 - total)))
        total += len(chunks[-1])
    return b"".join(chunks), d.eof


def _snappy_xerial(data: bytes) -> bytes:
    parts = [XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        parts += (_I32.pack(len(block)), block)
    return b"".join(parts)


def _snappy_blocks(data: bytes) -> list[bytes]:
    """The raw snappy blocks of a snappy records section, xerial-framed or not."""
    if not data.startswith(_XERIAL_MAGIC):
        return [data]
    if len(data) < len(XERIAL_HEADER):
        raise CorruptRecordError("cannot decompress SNAPPY records: xerial header is truncated")
    blocks, pos = [], len(XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError(
                "cannot decompress SNAPPY records: xerial block length is truncated"
            )
        (size,) = _I32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptRecordError(
                f"cannot decompress SNAPPY records: xerial block of {size} bytes is truncated"
            )
        blocks.append(data[pos : pos + size])
        pos += size
    return blocks


def _snappy_decompress(data: bytes, max_size: int | None) -> bytes:
    blocks = _snappy_blocks(data)
    declared = sum(cramjam.snappy.decompress_raw_len(b) for b in blocks)
    if max_size is not None and declared > max_size:
        raise CorruptRecordError(f"records decompress to more than {max_size} bytes")
    return b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in blocks)


def _zstd_decompress(data: bytes, max_size: int | None) -> bytes:
    """One zstd frame. A frame that declares its size is checked against `max_size`
    first; one that does not (Java's streaming producer) is decompressed into a small
    buffer, then, if that was too small, into one of `max_size` bytes."""
    if max_size is None:
        d = _ZSTD.decompressobj()
        out = d.decompress(data)
        if not d.eof:
            raise CorruptRecordError("cannot decompress ZSTD records: the stream is truncated")
        return out
    size = zstandard.get_frame_parameters(data).content_size
    if size != zstandard.CONTENTSIZE_UNKNOWN:
        if size > max_size:
            raise CorruptRecordError(f"records decompress to more than {max_size} bytes")
        return _ZSTD.decompress(data)
    first = min(max_size, len(data) * 8 + 65536)
    try:
        return _ZSTD.decompress(data, max_output_size=first)
    except zstandard.ZstdError:
        if first == max_size:
            raise
    return _ZSTD.decompress(data, max_output_size=max_size)
