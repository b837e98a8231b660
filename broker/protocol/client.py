"""A minimal blocking Kafka client over the broker's own codec: one TCP connection,
requests answered in order. For tools that need requests the bundled clients do
not offer (the readiness check of `cluster up`, OffsetDelete for `logflume groups
--delete-offsets`, `logflume transactions`) and for protocol-level tests.

`Security` says how to connect: TLS with an `ssl.SSLContext` (SSL and SASL_SSL
listeners) and a SASL login (PLAIN, SCRAM-SHA-256/512) run right after connecting,
before any other request (SASL_PLAINTEXT and SASL_SSL listeners), with the same
login sequence as the broker's own inter-broker connections (broker/sasl/client.py).
Building a Security from client properties is the tools' business
(logflume/wire_config.py). Not thread-safe: one owner per client.
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import struct

from broker.protocol.codec import decode_response, encode_request
from broker.sasl.client import SaslAuthenticationError, SaslClientError, login

__all__ = [
    "PLAINTEXT",
    "BlockingClient",
    "SaslAuthenticationError",
    "SaslClientError",
    "SaslLogin",
    "Security",
]


@dataclasses.dataclass(frozen=True)
class SaslLogin:
    mechanism: str  # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    username: str
    password: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True)
class Security:
    """How to reach a listener: `tls` for SSL / SASL_SSL, `sasl` for SASL_*.
    The default, Security(), is PLAINTEXT."""

    tls: ssl.SSLContext | None = None
    sasl: SaslLogin | None = None


PLAINTEXT = Security()


class BlockingClient:
    """Connects (and, with `security.sasl`, logs in) on construction: raises
    OSError (ssl.SSLError included) when it cannot connect, SaslAuthenticationError
    when the broker refuses the login, SaslClientError when the broker's SCRAM
    answer does not check out."""

    def __init__(
        self,
        host: str,
        port: int,
        timeout: float = 10.0,
        client_id: str = "logflume",
        security: Security = PLAINTEXT,
    ):
        self.client_id = client_id
        self.corr = 0
        self.sock = socket.create_connection((host, port), timeout=timeout)
        try:
            if security.tls is not None:
                self.sock = security.tls.wrap_socket(self.sock, server_hostname=host)
            if security.sasl is not None:
                self._login(security.sasl)
        except BaseException:
            self.sock.close()
            raise

    def _login(self, sasl: SaslLogin) -> None:
        steps = login(sasl.mechanism, sasl.username, sasl.password)
        try:
            request = next(steps)
            while True:
                request = steps.send(self.request(*request))
        except StopIteration:
            return

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
