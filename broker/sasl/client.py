"""The client side of PLAIN and SCRAM, for this broker's own connections to other
brokers (replica fetchers on a SASL inter-broker listener). Pure: `tokens()` is a
generator that yields each token to send and receives the server's answer.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Generator

from broker.sasl.scram import MECHANISMS, salted_password


class SaslClientError(Exception):
    """The server's answer does not check out (e.g. a wrong SCRAM server signature)."""


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def tokens(mechanism: str, user: str, password: str) -> Generator[bytes, bytes, None]:
    """Yields the tokens to send; `.send(answer)` gives the next one."""
    if mechanism == "PLAIN":
        yield b"\0" + user.encode() + b"\0" + password.encode()
        return
    digest = MECHANISMS[mechanism]
    nonce = secrets.token_urlsafe(24)
    first_bare = f"n={_escape(user)},r={nonce}"
    server_first = (yield f"n,,{first_bare}".encode()).decode()
    attrs = dict(item.split("=", 1) for item in server_first.split(",") if "=" in item)
    if not attrs.get("r", "").startswith(nonce) or "s" not in attrs or "i" not in attrs:
        raise SaslClientError(f"unexpected SCRAM server-first message {server_first[:80]!r}")
    salted = salted_password(mechanism, password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_final = yield f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    expected = b"v=" + base64.b64encode(hmac.new(server_key, auth_message, digest).digest())
    if not hmac.compare_digest(server_final, expected):
        raise SaslClientError("the SCRAM server signature does not match")
