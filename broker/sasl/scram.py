"""SCRAM (RFC 5802, RFC 7677): Kafka's stored credentials and the server exchange.

A credential is what Kafka stores per user and mechanism (never the password):
salt, StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key") and
the iteration count, written as `salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>` (Kafka's ZooKeeper form, `ScramCredential.to_kafka`).

`ScramServer` is one exchange, as Kafka's ScramSaslServer runs it:

    client-first  n,,n=<user>,r=<client nonce>       -> server-first r=..,s=..,i=..
    client-final  c=biws,r=<nonce>,p=<proof>          -> server-final v=<signature>

Only the gs2 flag `n` (no channel binding) is accepted, as in Kafka. The client-final
nonce must end with the combined nonce, as Kafka checks it: librdkafka < 2.6.1 (kcat
1.7's 2.0.2 among them) repeats the client nonce in front of it. A failure raises
`AuthenticationFailed` with Kafka's message for the client and, after the client's
final message, the RFC's `e=...` server-final answer. Pure: nonces and salts come
from `secrets` unless a test passes them.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import re
import secrets

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum for both
MAX_ITERATIONS = 16384
_SASLNAME = re.compile(r"(?:[^=,]|=2C|=3D)+")


class AuthenticationFailed(Exception):
    """The client failed to authenticate. `str()` is Kafka's message to the client;
    `server_final` the RFC 5802 `e=` message when one is due; `user` who tried."""

    def __init__(self, message: str, user: str | None = None, server_final: bytes = b""):
        super().__init__(message)
        self.user = user
        self.server_final = server_final


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _hmac(digest: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, digest).digest()


@dataclasses.dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, salted: bytes, iterations: int
    ) -> ScramCredential:
        """What AlterUserScramCredentials carries (the client salted the password)."""
        digest = MECHANISMS[mechanism]
        client_key = _hmac(digest, salted, b"Client Key")
        return cls(
            salt,
            hashlib.new(digest, client_key).digest(),
            _hmac(digest, salted, b"Server Key"),
            iterations,
        )

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes = b""
    ) -> ScramCredential:
        salt = salt or secrets.token_bytes(32)
        salted = salted_password(mechanism, password, salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def to_kafka(self) -> str:
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_kafka(cls, text: str) -> ScramCredential:
        """Parse Kafka's form; ValueError when it is not one."""
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as e:
            raise ValueError(f"not a SCRAM credential: {e}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for item in message.split(","):
        if len(item) < 2 or item[1] != "=":
            raise ValueError(f"malformed attribute {item[:20]!r}")
        out.append((item[0], item[2:]))
    return out


def decode_saslname(name: str) -> str:
    if not _SASLNAME.fullmatch(name):
        raise ValueError("invalid user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange. `lookup(user)` gives the user's ScramCredential or None.
    Created per authentication; not shared."""

    def __init__(self, mechanism: str, lookup, nonce: str | None = None):
        self.mechanism = mechanism
        self._digest = MECHANISMS[mechanism]
        self._lookup = lookup
        self._server_nonce = nonce or secrets.token_urlsafe(24)
        self.user: str | None = None
        self.complete = False
        self._step = self._client_first

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next message; AuthenticationFailed ends it."""
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed(
                "Authentication failed: SCRAM message is not UTF-8", self.user
            ) from None
        return self._step(text)

    def _client_first(self, text: str) -> bytes:
        self._step = self._done
        gs2_flag, _, rest = text.partition(",")
        authzid, sep, bare = rest.partition(",")
        try:
            if gs2_flag != "n":
                raise ValueError(f"channel binding flag {gs2_flag[:10]!r} (only 'n' is served)")
            if authzid and not authzid.startswith("a="):
                raise ValueError("malformed authorization id")
            attrs = _attributes(bare)
            if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
                raise ValueError("expected n=<user>,r=<nonce>")
            user = decode_saslname(attrs[0][1])
        except ValueError as e:
            raise AuthenticationFailed(
                f"Authentication failed: invalid SCRAM client first message: {e}"
            ) from None
        self.user = user
        if authzid and decode_saslname(authzid[2:]) != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
                user,
            )
        cred = self._lookup(user)
        if cred is None:
            raise AuthenticationFailed("Authentication failed: Invalid user credentials", user)
        self._cred = cred
        self._gs2_header = f"{gs2_flag},{authzid},"
        self._nonce = attrs[1][1] + self._server_nonce
        self._client_first_bare = bare
        self._server_first = f"r={self._nonce},s={_b64(cred.salt)},i={cred.iterations}"
        self._step = self._client_final
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._step = self._done
        fail = (
            "Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {self.mechanism}"
        )
        try:
            attrs = _attributes(text)
            if len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r" or attrs[-1][0] != "p":
                raise ValueError("expected c=..,r=..,p=..")
            binding = base64.b64decode(attrs[0][1], validate=True)
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except ValueError as e:
            raise AuthenticationFailed(
                f"Authentication failed: invalid SCRAM client final message: {e}",
                self.user,
                b"e=invalid-encoding",
            ) from None
        if binding != self._gs2_header.encode():
            raise AuthenticationFailed(fail, self.user, b"e=channel-bindings-dont-match")
        # Kafka (since 3.8.1) accepts a nonce that ends with the combined one:
        # librdkafka before 2.6.1 sends the client nonce twice (librdkafka #4895).
        if not attrs[1][1].endswith(self._nonce):
            raise AuthenticationFailed(fail, self.user, b"e=other-error")
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        cred = self._cred
        signature = _hmac(self._digest, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed(fail, self.user, b"e=invalid-proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), cred.stored_key):
            raise AuthenticationFailed(fail, self.user, b"e=invalid-proof")
        self.complete = True
        return f"v={_b64(_hmac(self._digest, cred.server_key, auth_message))}".encode()

    def _done(self, text: str) -> bytes:
        raise AuthenticationFailed("Authentication failed: unexpected SCRAM message", self.user)
