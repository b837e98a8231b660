"""The TLS transport of the broker's SSL listeners (broker.server.tls_transport), over
a real loopback connection to asyncio's own TLS client: responses of bytes and file
slices arrive whole and in order however the socket drains, reading pauses and
resumes, closing sends what is queued, and a slice past its file's end or a failed
handshake closes the connection."""

import asyncio
import socket
import ssl

import pytest

from broker.log.common import FetchSlice, SegmentFile
from broker.server.tls_transport import CHUNK, HIGH_WATER, TlsBuffers, TlsTransport
from common import certs
from common.aio import within


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = certs.new_ca()
    ca_file = certs.write_ca(d, ca)
    keystore = certs.write_keystore(
        d, "broker", certs.issue(ca, "localhost", hosts=["127.0.0.1"], server=True)
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(keystore)
    client = ssl.create_default_context(cafile=str(ca_file))
    return server, client, ca_file


@pytest.fixture
def segment(tmp_path):
    path = tmp_path / "seg.log"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    with SegmentFile(str(path), "rb") as f:
        yield f


class Recorder(asyncio.Protocol):
    def __init__(self):
        self.received = bytearray()
        self.arrived = asyncio.Event()
        self.events: list[str] = []
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        self.events.append("made")

    def data_received(self, data):
        self.received += data
        self.arrived.set()

    def eof_received(self):
        self.events.append("eof")
        return False

    def pause_writing(self):
        self.events.append("pause")

    def resume_writing(self):
        self.events.append("resume")

    def connection_lost(self, exc):
        self.lost.set_result(exc)


async def connected(pki, client_ctx=None):
    """(server transport, its protocol, client reader, client writer)."""
    server_ctx, default_client_ctx, _ = pki
    client_ctx = client_ctx or default_client_ctx
    loop = asyncio.get_running_loop()
    listening = socket.create_server(("127.0.0.1", 0))
    listening.setblocking(False)
    port = listening.getsockname()[1]
    client = asyncio.ensure_future(
        asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, server_hostname="localhost")
    )
    sock, _ = await within(loop.sock_accept(listening), 10)
    listening.close()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)  # so that it fills
    transport = TlsTransport(sock, server_ctx, TlsBuffers())
    await within(transport.handshake(), 10)
    reader, writer = await within(client, 10)
    protocol = Recorder()
    transport.start(protocol)
    return transport, protocol, reader, writer


async def test_a_response_of_bytes_and_slices_arrives_whole_and_in_order(pki, segment):
    transport, protocol, reader, writer = await connected(pki)
    size = len(bytes(range(256)) * 4096)
    parts = [
        b"head",
        FetchSlice(segment, 3, size - 3, 1),  # many chunks, read as the socket drains
        bytearray(b"middle"),
        memoryview(b"x" * (2 * CHUNK + 5)),  # a large bytes part, encrypted in place
        FetchSlice(segment, 0, 10, 1),
    ]
    transport.write_parts(parts)
    transport.write(b"second response")
    assert protocol.events == ["made", "pause"]  # far more than the high-water mark queued
    assert transport.get_write_buffer_size() > HIGH_WATER
    expected = b"".join(
        bytes(p) if not isinstance(p, FetchSlice) else p.read_bytes() for p in parts
    )
    expected += b"second response"
    got = await within(reader.readexactly(len(expected)), 20)
    assert got == expected
    assert protocol.events == ["made", "pause", "resume"]
    assert transport.get_write_buffer_size() == 0
    writer.close()


async def test_close_sends_what_is_queued_then_closes(pki, segment):
    transport, protocol, reader, writer = await connected(pki)
    transport.write_parts([b"last words", FetchSlice(segment, 0, 100_000, 1)])
    transport.close()
    assert transport.is_closing()
    transport.write(b"dropped after close")
    got = await within(reader.read(), 20)  # to the end: close_notify, then EOF
    assert got == b"last words" + segment_bytes(segment, 0, 100_000)
    assert await within(protocol.lost, 10) is None
    writer.close()


def segment_bytes(segment, position, length):
    return FetchSlice(segment, position, length, 1).read_bytes()


async def test_requests_arrive_and_wait_while_reading_is_paused(pki):
    transport, protocol, reader, writer = await connected(pki)
    writer.write(b"first")
    await writer.drain()
    await within(until_received(protocol, b"first"), 10)
    transport.pause_reading()
    assert not transport.is_reading()
    writer.write(b"second")
    await writer.drain()
    await asyncio.sleep(0.2)
    assert protocol.received == b"first"
    transport.resume_reading()
    await within(until_received(protocol, b"firstsecond"), 10)
    writer.close()  # close_notify: the protocol hears of the end, the transport closes
    await within(protocol.lost, 10)
    assert protocol.events[-1] == "eof"


async def test_a_slice_past_the_end_of_its_file_closes_the_connection(pki, segment):
    transport, protocol, reader, writer = await connected(pki)
    size = len(segment_bytes(segment, 0, 1 << 20))
    transport.write_parts([b"head", FetchSlice(segment, size - 10, 20, 1), b"never"])
    exc = await within(protocol.lost, 10)
    assert isinstance(exc, OSError) and "segment file ends" in str(exc)
    got = await within(reader.read(), 10)
    assert b"never" not in got
    writer.close()


async def test_a_plaintext_client_fails_the_handshake(pki):
    server_ctx, _, _ = pki
    loop = asyncio.get_running_loop()
    listening = socket.create_server(("127.0.0.1", 0))
    listening.setblocking(False)
    port = listening.getsockname()[1]
    client = asyncio.ensure_future(asyncio.open_connection("127.0.0.1", port))
    sock, _ = await within(loop.sock_accept(listening), 10)
    listening.close()
    reader, writer = await within(client, 10)
    writer.write(b"\0\0\0\x0a" + b"not a TLS record")
    transport = TlsTransport(sock, server_ctx, TlsBuffers())
    with pytest.raises(ssl.SSLError):
        await within(transport.handshake(), 10)
    sock.close()
    writer.close()


async def test_a_client_that_leaves_in_the_handshake_is_a_reset(pki):
    server_ctx, _, _ = pki
    loop = asyncio.get_running_loop()
    listening = socket.create_server(("127.0.0.1", 0))
    listening.setblocking(False)
    client = socket.create_connection(listening.getsockname())
    sock, _ = await within(loop.sock_accept(listening), 10)
    listening.close()
    transport = TlsTransport(sock, server_ctx, TlsBuffers())
    client.close()
    with pytest.raises(ConnectionResetError):
        await within(transport.handshake(), 10)
    sock.close()


async def until_received(protocol, expected):
    while protocol.received != expected:
        protocol.arrived.clear()
        await protocol.arrived.wait()


async def test_a_closed_segment_file_closes_the_connection(pki, tmp_path):
    transport, protocol, reader, writer = await connected(pki)
    path = tmp_path / "closed.log"
    path.write_bytes(b"records")
    segment = SegmentFile(str(path), "rb")
    segment.close()
    transport.write_parts([b"head", FetchSlice(segment, 0, 7, 1)])
    assert isinstance(await within(protocol.lost, 10), ValueError)
    writer.close()


async def test_tls_1_2_clients_are_served(pki, segment):
    client_ctx = ssl.create_default_context(cafile=str(pki[2]))
    client_ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    transport, protocol, reader, writer = await connected(pki, client_ctx)
    assert transport.get_extra_info("ssl_object").version() == "TLSv1.2"
    writer.write(b"request")
    await within(until_received(protocol, b"request"), 10)
    transport.write_parts([b"answer", FetchSlice(segment, 0, 300_000, 1)])
    got = await within(reader.readexactly(6 + 300_000), 10)
    assert got == b"answer" + segment_bytes(segment, 0, 300_000)
    writer.close()
