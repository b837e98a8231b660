"""Regressions for what the live fuzzer (test_fuzz_live.py) found in the broker."""

import gzip
import resource
import socket
import struct
import time

import crc32c
import pytest

from broker.protocol import ApiKey, ErrorCode, encode_request
from broker.protocol.records import (
    CRC_AT,
    CRC_FROM,
    HEADER_SIZE,
    BatchBuilder,
    Codec,
    CorruptRecordError,
    RecordBatch,
    iter_batches,
)
from tests.broker.server.fuzzlib import Verdict, _read_frames
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body


def _fix_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, CRC_AT, crc32c.crc32c(bytes(buf[CRC_FROM:])))
    return bytes(buf)


def _good(codec=Codec.NONE) -> bytes:
    b = BatchBuilder(codec=codec)
    for i in range(5):
        b.append(b"value-%d" % i, key=b"k", headers=[("h", b"v"), ("n", None)])
    return b.build()


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.LZ4])
def test_valid_batches_pass_validate_records(codec):
    RecordBatch(_good(codec)).validate_records()


def _with_records(records: bytes, count: int, codec: int = 0) -> bytes:
    """A batch whose records section is `records`, CRC correct."""
    buf = bytearray(_good())
    del buf[HEADER_SIZE:]
    buf += records
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, codec)
    struct.pack_into(">i", buf, 23, count - 1)
    struct.pack_into(">i", buf, 57, count)
    return _fix_crc(buf)


def _corrupt_variants() -> list[bytes]:
    good = _good()
    body = good[HEADER_SIZE:]
    out = []
    flipped = bytearray(good)  # a key length pointing far past the record
    flipped[HEADER_SIZE + 4] = 0x7E
    out.append(_fix_crc(flipped))
    out.append(_with_records(body, 6))  # header says one more record than there is
    out.append(_with_records(body + b"\x00", 5))  # trailing byte
    out.append(_with_records(body[:-1], 5))  # last record cut short
    out.append(_with_records(b"\x01\x00" * 3, 1))  # nonsense
    out.append(_with_records(body, 5, codec=6))  # no such codec
    out.append(_with_records(b"not gzip at all", 5, codec=Codec.GZIP))
    out.append(_with_records(gzip.compress(body)[:-9], 5, codec=Codec.GZIP))  # truncated
    return out


@pytest.mark.parametrize("index", range(8))
def test_corrupt_records_sections_with_a_valid_crc_are_caught(index):
    data = _corrupt_variants()[index]
    batch = RecordBatch(data)
    batch.validate()  # the CRC is fine: only the records check can tell
    with pytest.raises(CorruptRecordError):
        batch.validate_records()


def test_a_decompression_bomb_is_refused_without_inflating_it():
    bomb = gzip.compress(b"\x00" * (100 << 20), compresslevel=9)
    batch = RecordBatch(_with_records(bomb, 1, codec=Codec.GZIP))
    batch.validate()
    with pytest.raises(CorruptRecordError, match="more than"):
        batch.validate_records(max_decompressed=1 << 20)


def test_produce_of_a_batch_with_garbage_records_is_corrupt_message(broker):
    with WireClient(broker.port) as c:
        for bad in _corrupt_variants():
            r = c.request(ApiKey.PRODUCE, 8, produce_body("garbage", bad))
            code = r["responses"][0]["partition_responses"][0]["error_code"]
            assert code == ErrorCode.CORRUPT_MESSAGE
        r = c.request(ApiKey.PRODUCE, 8, produce_body("garbage", batch(b"ok")))
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
        f = c.request(ApiKey.FETCH, 11, fetch_body("garbage", 0))
        stored = list(iter_batches(bytes(f["responses"][0]["partitions"][0]["records"])))
        assert [len(b.records()) for b in stored] == [1]
        assert stored[0].base_offset == 0


def test_half_closed_connection_gets_whole_frames_or_nothing(broker):
    """A client that shuts down its sending side while a long-poll fetch holds back a
    fetch with data gets whole response frames, then EOF (end-to-end companion of
    the unit test below, whose timing it cannot force)."""
    with WireClient(broker.port) as c:
        for _ in range(20):
            c.request(ApiKey.PRODUCE, 8, produce_body("data", batch(b"x" * 1000)))
        c.request(ApiKey.PRODUCE, 8, produce_body("empty", batch(b"y")))
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
            wait = fetch_body("empty", 1, max_wait_ms=300)
            s.sendall(
                encode_request(ApiKey.FETCH, 11, 1, "t", wait)
                + encode_request(ApiKey.FETCH, 11, 2, "t", fetch_body("data", 0))
            )
            s.shutdown(socket.SHUT_WR)
            try:
                corrs, closed, timed_out = _read_frames(s, time.monotonic() + 10, None)
            except Verdict as e:
                pytest.fail(f"broken framing after EOF: {e}")
            assert closed and not timed_out
            assert corrs in ([], [1], [1, 2])


class _FakeTransport:
    """Just enough of an asyncio transport; `closing` as after asyncio's close()."""

    def __init__(self, sock):
        self.sock = sock
        self.closing = False
        self.written = []

    def get_extra_info(self, name):
        return {"socket": self.sock, "peername": ("127.0.0.1", 1)}.get(name)

    def is_closing(self):
        return self.closing

    def writelines(self, chunks):
        if not self.closing:  # asyncio drops writes to a closing transport
            self.written.extend(chunks)

    def get_write_buffer_size(self):
        return 0

    def close(self):
        self.closing = True

    abort = close

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


def _connection(sock):
    from types import SimpleNamespace

    from broker.metrics import BrokerMetrics
    from broker.server.connection import Connection

    core = SimpleNamespace(
        config={"socket.request.max.bytes": 1 << 20, "sasl.server.max.receive.size": 1 << 19}
    )
    core.metrics = BrokerMetrics()
    server = SimpleNamespace(
        core=core,
        connections=set(),
        direct_sendfile=True,
        loop_sendfile=False,
        fenced=False,
        sasl_factories={},
    )
    conn = Connection(server, "PLAINTEXT")
    transport = _FakeTransport(sock)
    conn.connection_made(transport)
    return conn, transport


def test_no_sendfile_slice_goes_out_on_a_closing_transport(tmp_path):
    """Found by the fuzzer: after a client's EOF asyncio closes the transport and
    drops plain writes, but a response completing just then still had its records
    sent by os.sendfile, headerless, into the byte stream."""
    from broker.log.common import FetchSlice, SegmentFile
    from broker.protocol import RequestHeader

    path = tmp_path / "seg.log"
    path.write_bytes(_good() * 3)
    a, b = socket.socketpair()
    with a, b, SegmentFile(str(path), "rb") as f:
        conn, transport = _connection(a)
        transport.closing = True  # asyncio's close() after EOF, connection_lost pending
        header = RequestHeader(ApiKey.FETCH, 11, 7, None)
        conn._order.add((header, [b"\x00\x00\x00\x10header", FetchSlice(f, 0, 100, 1)]))
        conn._pump()
        b.setblocking(False)
        with pytest.raises(BlockingIOError):
            b.recv(1000)
        assert conn.closed


def test_eof_from_the_client_closes_the_connection():
    a, b = socket.socketpair()
    with a, b:
        conn, transport = _connection(a)
        assert conn.eof_received() is False
        assert conn.closed and transport.closing


def test_create_topics_past_the_open_file_limit_is_answered_not_dropped(broker_factory):
    """CreateTopics asking for 8,194 partitions (a bit-flipped count) ran out of file
    descriptors half way (5 per partition, limit 20,000) and closed the connection
    with a traceback; it is now refused up front and the broker still serves. The
    broker runs with a soft limit of 4,096 open files, whatever this machine's is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    try:
        broker = broker_factory()  # inherits the limit
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    with WireClient(broker.port) as c:
        body = {
            "topics": [
                {
                    "name": "wide",
                    "num_partitions": 8194,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 60000,
            "validate_only": False,
        }
        (topic,) = c.request(ApiKey.CREATE_TOPICS, 4, body)["topics"]
        assert topic["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        assert "open files" in topic["error_message"]
        body["topics"][0].update(name="narrow", num_partitions=3)
        (topic,) = c.request(ApiKey.CREATE_TOPICS, 4, body)["topics"]
        assert topic["error_code"] == ErrorCode.NONE
    assert "Traceback" not in broker.log_text()
