"""The TCP and HTTP sources over TLS (a trial CA from common/certs.py), mutual TLS
for TCP, and the HTTP source's bearer token."""

import asyncio
import ssl

import aiohttp
import pytest

from common import certs
from common.aio import within
from common.ports import free_port
from sources._tls import ServerTlsConfig
from sources.http import HttpAuth, HttpSource
from tests.sources.harness import FakeMetrics, Harness, build
from tests.sources.test_network import started

TOKEN = "t0ken-for-tests"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = certs.new_ca()
    server = certs.issue(ca, "localhost", hosts=["localhost", "127.0.0.1"], server=True)
    return {
        "ca": str(certs.write_ca(d, ca)),
        "server": str(certs.write_keystore(d, "server", server)),
        "client": str(certs.write_keystore(d, "client", certs.issue(ca, "web1"))),
    }


def client_context(pki, with_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki["ca"])
    if with_cert:
        ctx.load_cert_chain(pki["client"])
    return ctx


async def test_tcp_over_mutual_tls(tmp_path, pki):
    port = free_port()
    tls = ServerTlsConfig(cert=pki["server"], key=pki["server"], ca=pki["ca"])
    source = build(("source", "tcp"), tmp_path, None, listen=f"127.0.0.1:{port}", tls=tls)
    h = await started(Harness(source), port, "tcp")
    ctx = client_context(pki, with_cert=True)
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    writer.write(b"over tls\n")
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    await h.wait_lines(1)
    # without a client certificate the handshake (TLS 1.3: the first read) fails
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client_context(pki, with_cert=False)
    )
    writer.write(b"refused\n")
    try:
        answer = await within(reader.read(), 5)  # the server hangs up
    except (ssl.SSLError, ConnectionResetError):
        answer = b""
    assert answer == b""
    writer.close()
    await asyncio.sleep(0.2)
    await h.stop()
    assert h.bodies() == [b"over tls"]


async def test_https_with_a_bearer_token(tmp_path, pki):
    port, metrics = free_port(), FakeMetrics()
    tls = ServerTlsConfig(cert=pki["server"], key=pki["server"])
    source = build(
        ("source", "http"), tmp_path, metrics, listen=f"127.0.0.1:{port}", tls=tls,
        auth=HttpAuth(bearer_token=TOKEN),
    )  # fmt: skip
    h = await started(Harness(source), port, "tcp")
    url = f"https://127.0.0.1:{port}/"
    ctx = client_context(pki, with_cert=False)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
        async with s.get(f"https://127.0.0.1:{port}/health", ssl=ctx) as r:
            assert r.status == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            async with s.post(url, data=b"no\n", headers=headers, ssl=ctx) as r:
                assert r.status == 401
                assert r.headers["WWW-Authenticate"].startswith("Bearer")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with s.post(url, data=b"yes\n", headers=auth, ssl=ctx) as r:
            assert r.status == 204
    await h.stop()
    assert h.bodies() == [b"yes"]
    assert metrics.value("logflume_agent_http_unauthorized_total", component="src") == 2
    assert TOKEN not in repr(source.config)


def test_tls_and_auth_errors_name_the_key(tmp_path, pki):
    config = HttpSource.Config(
        tls=ServerTlsConfig(cert=str(tmp_path / "missing.pem"), key=pki["server"]),
        auth=HttpAuth(bearer_token=""),
    )
    assert HttpSource.validate(config) == [
        "auth.bearer_token: must not be empty",
        f"tls.cert: cannot read {tmp_path}/missing.pem: No such file or directory",
    ]
    config = HttpSource.Config(tls=ServerTlsConfig(cert=pki["ca"], key=pki["ca"]))
    (error,) = HttpSource.validate(config)
    assert error.startswith("tls: cert, key and ca do not load")
