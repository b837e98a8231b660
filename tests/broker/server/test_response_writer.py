"""The response writer (broker.server.response_writer) against a recording transport:
bytes and file slices go out in order, nothing is written while a slice is being
finished, a closing transport gets nothing. (A TLS connection's transport takes the
parts as they are: tests/broker/server/test_tls_transport.py.)"""

import asyncio

import pytest

from broker.log.common import FetchSlice, SegmentFile
from broker.server.response_writer import ResponseWriter
from common.aio import within


class RecordingTransport:
    def __init__(self):
        self.out = bytearray()
        self.closing = False

    def get_extra_info(self, name):
        return None  # no socket: slices are finished by a copy, as on uvloop

    def is_closing(self):
        return self.closing

    def write(self, data):
        self.out += data

    def writelines(self, chunks):
        for chunk in chunks:
            self.out += chunk

    def get_write_buffer_size(self):
        return 0


@pytest.fixture
def segment(tmp_path):
    path = tmp_path / "seg.log"
    path.write_bytes(bytes(range(256)))
    with SegmentFile(str(path), "rb") as f:
        yield f


def writer(sent=None):
    events = []

    def on_sent():
        events.append(("sent",))
        if sent is not None:
            sent.set()

    w = ResponseWriter(
        direct_sendfile=True,
        loop_sendfile=False,
        close=lambda reason: events.append(("close", reason)),
        sent=on_sent,
    )
    transport = RecordingTransport()
    w.connect(transport)
    return w, transport, events


async def test_a_slice_is_finished_before_anything_after_it(segment):
    sent = asyncio.Event()
    w, transport, events = writer(sent=sent)
    w.write([b"head", FetchSlice(segment, 10, 5, 1), b"tail", FetchSlice(segment, 0, 2, 1)])
    assert w.sending and transport.out == b"head"
    while len(events) < 2:  # each slice finished in the background is reported
        await within(sent.wait(), 5)
        sent.clear()
    assert not w.sending
    assert transport.out == b"head" + bytes(range(10, 15)) + b"tail" + bytes(range(2))
    assert events == [("sent",), ("sent",)]


async def test_bytes_only_responses_are_written_at_once():
    w, transport, events = writer()
    w.write([b"one", bytearray(b"two")])
    assert transport.out == b"onetwo" and not w.sending and not events


async def test_nothing_goes_to_a_closing_transport(segment):
    w, transport, events = writer()
    transport.closing = True
    w.write([b"head", FetchSlice(segment, 0, 5, 1)])
    assert transport.out == b"" and events == [("close", "transport closed")]
