"""Request framing and response segments (broker.server.framing), without sockets: a
byte stream cut into reads anywhere gives the same frames, refused size prefixes are
refused before their body arrives."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.common import FetchSlice
from broker.server.framing import FrameTooLarge, RequestFramer, segments, token_frame


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def drain(framer: RequestFramer, out: list[bytes] | None = None) -> list[bytes]:
    """Every complete frame, appended to `out` (kept if next_frame raises)."""
    out = [] if out is None else out
    while (f := framer.next_frame()) is not None:
        out.append(f)
    return out


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=64), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=20),
)
def test_any_split_of_the_stream_into_reads_gives_the_same_frames(bodies, cuts):
    stream = b"".join(frame(b) for b in bodies)
    points = sorted({min(c, len(stream)) for c in cuts})
    framer = RequestFramer(1 << 20)
    got = []
    start = 0
    for point in [*points, len(stream)]:
        framer.receive_data(stream[start:point])
        got += drain(framer)
        start = point
    assert got == bodies
    assert framer.buffered == 0


@settings(max_examples=100, deadline=None)
@given(
    before=st.lists(st.binary(max_size=32), max_size=5),
    size=st.one_of(st.integers(101, 2**31 - 1), st.integers(-(2**31), -1)),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10),
)
def test_a_refused_prefix_ends_the_stream_however_it_is_split(before, size, cuts):
    """The frames before it come out; the refusal comes as soon as its four bytes
    are in, and again on every later call."""
    stream = b"".join(frame(b) for b in before) + struct.pack(">i", size) + b"body"
    points = sorted({min(c, len(stream)) for c in cuts})
    framer = RequestFramer(100)
    got = []
    start = 0
    with pytest.raises(FrameTooLarge):
        for point in [*points, len(stream)]:
            framer.receive_data(stream[start:point])
            drain(framer, got)
            start = point
    assert got == before
    with pytest.raises(FrameTooLarge):
        framer.next_frame()


def test_a_partial_frame_waits_for_the_rest():
    framer = RequestFramer(100)
    data = frame(b"hello") + frame(b"world")[:6]
    framer.receive_data(data)
    assert framer.next_frame() == b"hello"
    assert framer.next_frame() is None
    assert framer.buffered == 6
    framer.receive_data(b"rld")
    assert framer.next_frame() == b"world"


def test_an_empty_frame_is_a_frame():
    framer = RequestFramer(100)
    framer.receive_data(frame(b""))
    assert framer.next_frame() == b""


@pytest.mark.parametrize("size", [101, -1, -(1 << 31)])
def test_a_size_above_the_limit_or_negative_is_refused_before_its_body(size):
    framer = RequestFramer(100)
    framer.receive_data(struct.pack(">i", size))  # no body at all yet
    with pytest.raises(FrameTooLarge, match=rf"request size {size} exceeds socket.request.max"):
        framer.next_frame()


def test_the_limit_itself_is_allowed():
    framer = RequestFramer(100)
    framer.receive_data(frame(b"x" * 100))
    assert framer.next_frame() == b"x" * 100


def test_before_authentication_the_sasl_limit_holds_then_only_the_request_limit():
    framer = RequestFramer(1000, max_unauthenticated_bytes=10)
    framer.receive_data(frame(b"x" * 10) + struct.pack(">i", 11))
    assert framer.next_frame() == b"x" * 10
    with pytest.raises(FrameTooLarge, match="before authentication exceeds sasl.server.max"):
        framer.next_frame()
    framer.authenticated()
    framer.receive_data(b"y" * 11)
    assert framer.next_frame() == b"y" * 11


def test_the_request_limit_is_named_first_when_both_are_exceeded():
    framer = RequestFramer(100, max_unauthenticated_bytes=10)
    framer.receive_data(struct.pack(">i", 500))
    with pytest.raises(FrameTooLarge, match="socket.request.max.bytes=100"):
        framer.next_frame()


def test_a_bare_token_is_size_prefixed():
    assert b"".join(token_frame(b"abc")) == b"\0\0\0\3abc"
    assert b"".join(token_frame(b"")) == b"\0\0\0\0"


def _slice(n):
    return FetchSlice(None, 0, n, 1)


def test_segments_keep_bytes_runs_together_and_slices_apart():
    a, b = _slice(10), _slice(20)
    head, mid, tail = b"\0\0\0\x10head", bytearray(b"mid"), memoryview(b"tail")
    assert segments([head]) == [[head]]
    assert segments([head, a, mid, tail, b]) == [[head], a, [mid, tail], b]
    assert segments([head, a, b, tail]) == [[head], a, b, [tail]]
    assert segments([]) == []
