"""A minimal blocking Kafka client over the broker's own codec: one TCP connection,
requests answered in order. For tools that need one or two requests the bundled
clients do not offer (the readiness check of `cluster up`, OffsetDelete for
`logflume groups --delete-offsets`) and for protocol-level tests. Plaintext only.
Not thread-safe."""

from __future__ import annotations

import socket
import struct

from broker.protocol.codec import decode_response, encode_request


class BlockingClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0, client_id: str = "logflume"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, api_key: int, version: int, body: dict, client_id: str | None = None) -> int:
        self.corr += 1
        frame = encode_request(api_key, version, self.corr, client_id or self.client_id, body)
        self.sock.sendall(frame)
        return self.corr

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def recv(self, api_key: int, version: int) -> tuple[int, dict]:
        return decode_response(api_key, version, self.recv_frame())

    def request(self, api_key: int, version: int, body: dict) -> dict:
        corr = self.send(api_key, version, body)
        got, resp = self.recv(api_key, version)
        if got != corr:
            raise ConnectionError(f"answer {got} to request {corr}: out of order")
        return resp

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return bytes(buf)
