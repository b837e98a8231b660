"""SASL PLAIN (RFC 4616) as Kafka's PlainSaslServer serves it: the token is
`authzid NUL authcid NUL password`; the users are the `user_<name>="<password>"`
options of the listener's PlainLoginModule JAAS entry. One message, no challenge.
Pure."""

from __future__ import annotations

import hmac

from broker.sasl.scram import AuthenticationFailed


class PlainServer:
    """One PLAIN exchange against `users` ({name: password}). Not shared."""

    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]):
        self._users = users
        self.user: str | None = None
        self.complete = False
        self._used = False

    def evaluate(self, token: bytes) -> bytes:
        if self._used:
            raise AuthenticationFailed("Authentication failed: unexpected PLAIN message", self.user)
        self._used = True
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed(
                "Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts))
            )
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        self.user = user
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
                user,
            )
        expected = self._users.get(user)
        # compare even for an unknown user, so timing does not tell which users exist
        ok = hmac.compare_digest(password.encode(), (expected or "\0").encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password", user)
        self.complete = True
        return b""
