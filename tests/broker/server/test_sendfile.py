"""Large fetch responses: sendfile that the socket cannot take at once is finished
correctly (loop.sendfile on the stdlib loop, a copy on uvloop) and responses queued
behind it keep their order."""

import os
import socket

import pytest

from broker.protocol import ApiKey
from broker.protocol.records import iter_batches
from tests.broker.server.test_requests import create
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_multi_megabyte_fetch_with_pipelined_requests(broker_factory, loop):
    b = broker_factory(args=["--event-loop", loop])
    payloads = [os.urandom(900_000) for _ in range(8)]
    with WireClient(b.port) as c:
        create(c, "big", 1)
        for p in payloads:
            r = c.request(ApiKey.PRODUCE, 8, produce_body("big", batch(p)))
            assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
    with WireClient(b.port) as c:
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        corrs = []
        for _ in range(3):
            corrs.append(c.send(ApiKey.FETCH, 11, fetch_body("big", 0, max_bytes=64 << 20)))
            corrs.append(c.send(ApiKey.METADATA, 1, {"topics": []}))
        for i, corr in enumerate(corrs):
            if i % 2 == 0:
                got, body = c.recv(ApiKey.FETCH, 11)
                data = bytes(body["responses"][0]["partitions"][0]["records"])
                values = [r.value for bt in iter_batches(data) for r in bt.records()]
                assert values == payloads
            else:
                got, _ = c.recv(ApiKey.METADATA, 1)
            assert got == corr
