"""The client side of a SASL login (PLAIN and SCRAM), for this broker's own
connections to other brokers (replica fetchers and the transaction coordinator on
a SASL inter-broker listener, broker/cluster/interbroker.py) and for the blocking
client of the admin tools (broker/protocol/client.py). Pure: `login()` is a
generator that yields each request (SaslHandshake v1, then SaslAuthenticate v2 for
every token) and is sent each answer; `tokens()` yields the mechanism's tokens and
is sent the server's. The caller owns the connection and drives the generator.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Generator

from broker.protocol import ApiKey, ErrorCode
from broker.sasl.scram import MECHANISMS, salted_password

MECHANISM_NAMES = ("PLAIN", *MECHANISMS)

Request = tuple[int, int, dict]  # (api key, version, body)


class SaslClientError(Exception):
    """The server's answer does not check out (e.g. a wrong SCRAM server signature)."""


def refusal(message: str) -> str:
    """How a refused login reads: the server's message as Kafka's tools print it
    (Kafka's brokers start theirs with "Authentication failed"), other messages
    with that prefix."""
    if message.startswith("Authentication failed"):
        return message
    return f"Authentication failed: {message}"


class SaslAuthenticationError(Exception):
    """The server refused the login (Kafka's SaslAuthenticationException); the
    text is `refusal(server's message)`."""

    def __init__(self, message: str):
        super().__init__(refusal(message))


def login(mechanism: str, user: str, password: str) -> Generator[Request, dict, None]:
    """Yields the requests of a login as `user` and is sent each decoded answer;
    returns when the server accepted it. Raises SaslAuthenticationError when the
    server refuses (the mechanism or the credentials), SaslClientError when its
    answer does not check out."""
    resp = yield (ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    if resp["error_code"] != ErrorCode.NONE:
        raise SaslAuthenticationError(
            f"Client SASL mechanism '{mechanism}' not enabled in the server, "
            f"enabled mechanisms are [{', '.join(resp['mechanisms'])}]"
        )
    steps = tokens(mechanism, user, password)
    token = next(steps)
    while True:
        resp = yield (ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        if resp["error_code"] != ErrorCode.NONE:
            code = ErrorCode(resp["error_code"]).name
            raise SaslAuthenticationError(resp["error_message"] or f"{mechanism} as {user}: {code}")
        try:
            token = steps.send(resp["auth_bytes"])
        except StopIteration:
            return


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
