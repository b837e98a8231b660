"""Hostile or broken input: the broker answers with an error or closes that one
connection, keeps serving everybody else, and never stores anything corrupt."""

import random
import socket
import struct

from broker.protocol import ApiKey, ErrorCode, encode_request
from broker.protocol.records import iter_batches
from tests.broker.server.test_requests import create, records_of
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body


def still_serving(port: int, topic: str = "healthy") -> None:
    """A normal client round trip works."""
    with WireClient(port) as c:
        r = c.request(ApiKey.PRODUCE, 8, produce_body(topic, batch(b"alive")))
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
        f = c.request(ApiKey.FETCH, 11, fetch_body(topic, 0))
        assert b"alive" in records_of(f["responses"][0]["partitions"][0])


def closed_or_answered(port: int, payload: bytes) -> None:
    """Send `payload`, then require EOF/reset or a well-framed answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        except (ConnectionResetError, BrokenPipeError):
            return
    pos = 0
    while pos < len(data):  # whatever came back is whole frames
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4 + size
    assert pos == len(data)


def test_random_truncated_and_oversized_frames(broker_factory):
    b = broker_factory(settings={"socket.request.max.bytes": str(1 << 20)})
    rng = random.Random(1234)
    good = encode_request(ApiKey.METADATA, 1, 1, "fuzz", {"topics": None})
    payloads = [
        struct.pack(">i", 0x7FFFFFFF) + b"x" * 100,  # absurd length
        struct.pack(">i", -5) + b"x" * 100,  # negative length
        struct.pack(">i", (1 << 20) + 1) + b"x" * 100,  # just over socket.request.max.bytes
        struct.pack(">i", 2) + b"\x00\x00",  # shorter than a header
        struct.pack(">ihhi", 8, 9999, 0, 1),  # unknown api key
        struct.pack(">ihhih", 10, 3, 77, 1, -1),  # metadata v77
        good[: len(good) // 2],  # truncated mid-frame, then EOF
    ]
    for _ in range(150):
        body = rng.randbytes(rng.randrange(0, 300))
        header = struct.pack(
            ">hhih",
            rng.choice([0, 1, 2, 3, 18, 19, 32, rng.randrange(-5, 100)]),
            rng.randrange(-1, 13),
            rng.randrange(1 << 31),
            -1,
        )
        frame = header + body
        payloads.append(struct.pack(">i", len(frame)) + frame)
        mutated = bytearray(good)
        for _ in range(rng.randrange(1, 6)):
            mutated[rng.randrange(4, len(mutated))] = rng.randrange(256)
        payloads.append(bytes(mutated))
    for payload in payloads:
        closed_or_answered(b.port, payload)
    still_serving(b.port)
    assert "Traceback" not in b.log_text()


def test_corrupt_batches_never_reach_the_log(broker_factory):
    b = broker_factory()
    rng = random.Random(99)
    with WireClient(b.port) as c:
        create(c, "crc", 1)
        good = batch(b"one", b"two", key=b"k")
        accepted = 0
        for _ in range(60):
            bad = bytearray(good)
            for _ in range(rng.randrange(1, 4)):
                bad[rng.randrange(17, len(bad))] ^= 1 << rng.randrange(8)
            r = c.request(ApiKey.PRODUCE, 8, produce_body("crc", bytes(bad)))
            code = r["responses"][0]["partition_responses"][0]["error_code"]
            assert code in (ErrorCode.NONE, ErrorCode.CORRUPT_MESSAGE)
            accepted += code == ErrorCode.NONE
        r = c.request(ApiKey.PRODUCE, 8, produce_body("crc", good))
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
        f = c.request(ApiKey.FETCH, 11, fetch_body("crc", 0))
        data = bytes(f["responses"][0]["partitions"][0]["records"])
        stored = list(iter_batches(data, validate=True))
        assert len(stored) == accepted + 1
    b.restart()
    with WireClient(b.port) as c:
        f = c.request(ApiKey.FETCH, 11, fetch_body("crc", 0))
        assert (
            len(list(iter_batches(bytes(f["responses"][0]["partitions"][0]["records"]))))
            == accepted + 1
        )


def test_invalid_topic_names_touch_no_path(broker_factory):
    b = broker_factory()
    names = ["../../etc", "..", ".", "a/b", "x" * 250, "", "sp ace", "ünï"]
    with WireClient(b.port) as c:
        for name in names:
            r = c.request(ApiKey.PRODUCE, 8, produce_body(name, batch(b"x")))
            assert r["responses"][0]["partition_responses"][0]["error_code"] != 0
            md = c.request(ApiKey.METADATA, 1, {"topics": [{"name": name}]})
            assert md["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        md = c.request(ApiKey.METADATA, 1, {"topics": None})
        assert md["topics"] == []
    outside = {p.name for p in b.data_dir.parent.iterdir()}
    assert outside <= {b.data_dir.name, b.log_path.name}
    assert {p.name for p in b.data_dir.iterdir() if p.is_dir()} == {"meta"}
    still_serving(b.port)


def test_idle_connections_are_closed(broker_factory):
    b = broker_factory(settings={"connections.max.idle.ms": "300"})
    with WireClient(b.port) as c:
        assert c.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
        assert c.is_closed_by_peer(timeout=10)
    still_serving(b.port)
