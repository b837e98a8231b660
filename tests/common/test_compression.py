"""The five codecs of RecordBatch v2: framings that other clients write, truncation,
and the output bound that keeps a small batch from inflating to gigabytes."""

import gzip
import os

import cramjam
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from common.compression import (
    XERIAL_HEADER,
    Codec,
    CorruptRecordError,
    compress,
    decompress,
    decompress_bounded,
)

BOUND = 1 << 20


@settings(max_examples=40, deadline=None)
@given(codec=st.sampled_from(list(Codec)), data=st.binary(max_size=100_000))
def test_round_trip_bounded_and_not(codec, data):
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress_bounded(codec, packed, len(data)) == data


def test_snappy_is_written_in_xerial_blocks_of_32_kib_as_java_writes_it():
    data = os.urandom(40_000)
    packed = compress(Codec.SNAPPY, data)
    assert packed.startswith(XERIAL_HEADER)
    first = int.from_bytes(packed[16:20], "big")
    assert cramjam.snappy.decompress_raw_len(packed[20 : 20 + first]) == 32 * 1024
    assert kafka_codec.snappy_decode(packed) == data


def test_snappy_raw_blocks_as_librdkafka_writes_them_are_read():
    data = b"GET /index.html 200\n" * 500
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Codec.SNAPPY, raw) == data
    assert decompress(Codec.SNAPPY, kafka_codec.snappy_encode(data)) == data


def test_zstd_without_a_declared_size_as_java_streams_it():
    data = os.urandom(1000) * 300  # more than the first guess of 8x the input
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert zstandard.get_frame_parameters(packed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(Codec.ZSTD, packed) == data
    assert decompress_bounded(Codec.ZSTD, packed, len(data)) == data
    with pytest.raises(CorruptRecordError):
        decompress_bounded(Codec.ZSTD, packed, len(data) - 1)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_truncated_streams_are_corrupt(codec):
    packed = compress(codec, os.urandom(5000) * 20)
    for cut in (1, 7, len(packed) // 2):
        with pytest.raises(CorruptRecordError):
            decompress(codec, packed[:-cut])
        with pytest.raises(CorruptRecordError):
            decompress_bounded(codec, packed[:-cut], BOUND)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_garbage_is_corrupt(codec):
    with pytest.raises(CorruptRecordError, match=f"cannot decompress {codec.name}"):
        decompress(
            codec, b"\x82SNAPPY\x00 not what it claims" if codec == Codec.SNAPPY else b"junk"
        )


def test_unknown_codec_is_corrupt():
    with pytest.raises(CorruptRecordError, match="unknown compression codec 5"):
        decompress(5, b"x")


def _bombs():
    zeros = b"\x00" * (16 << 20)
    yield Codec.GZIP, gzip.compress(zeros, compresslevel=9)
    yield Codec.LZ4, compress(Codec.LZ4, zeros)
    yield Codec.SNAPPY, compress(Codec.SNAPPY, zeros)
    yield Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(zeros))
    yield Codec.ZSTD, zstandard.ZstdCompressor().compress(zeros)
    yield Codec.ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(zeros)


@pytest.mark.parametrize("codec,bomb", list(_bombs()))
def test_a_bomb_is_refused_at_the_bound(codec, bomb):
    assert len(bomb) < BOUND
    with pytest.raises(CorruptRecordError, match="more than|cannot decompress"):
        decompress_bounded(codec, bomb, BOUND)
