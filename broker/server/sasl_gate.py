"""What a connection on a SASL listener does with its frames before it is
authenticated, sans-I/O.

Until the SASL exchange completes, only ApiVersions, SaslHandshake and
SaslAuthenticate are served (after a v0 SaslHandshake: bare size-prefixed tokens,
which are not decoded as requests); anything else closes the connection, as Kafka's
SaslServerAuthenticator does. The state table is broker.sasl.authenticator's; the
gate turns each frame into a `Decision` (the answer to queue, whether the client is
now authenticated or failed, whether to close) that the connection carries out. A
failed authentication is answered (SaslAuthenticate only: a bare v0 token has no
error answer) and the connection closes after
`connection.failed.authentication.delay.ms`; frames arriving meanwhile are ignored.
"""

from __future__ import annotations

import dataclasses

from broker.protocol import ErrorCode, RequestHeader, api_versions_body
from broker.sasl.authenticator import Authenticator, Event, IllegalSaslState, State
from broker.sasl.scram import AuthenticationFailed
from broker.server.framing import token_frame


@dataclasses.dataclass(slots=True)
class Decision:
    """The gate's verdict on one frame, for the connection to carry out."""

    refuse: str | None = None  # not valid in this state: close at once, an invalid request
    authenticated: bool = False  # the exchange completed: the principal is the gate's
    failure: AuthenticationFailed | None = None  # log it; close after the delay
    header: RequestHeader | None = None  # the request answered; None for a bare token
    response: dict | list | None = None  # its body, or a bare token's frame; None: no answer
    timed: bool = False  # counted in the request metrics (every request with a header)
    close: str | None = None  # close once the answer is out (an unserved mechanism)


class SaslGate:
    """The SASL side of one connection. Owned by it; event-loop only."""

    __slots__ = ("authenticator", "features")

    def __init__(self, mechanisms: dict, features=None):
        """`mechanisms`: each enabled mechanism's server-exchange factory;
        `features(version)` the feature fields of an ApiVersions answer
        (FinalizedFeatures.api_versions_fields), None: none reported."""
        self.authenticator = Authenticator(mechanisms)
        self.features = features

    @property
    def passed(self) -> bool:
        """Authenticated: frames are requests served by the handlers from now on."""
        return self.authenticator.complete

    @property
    def failed(self) -> bool:
        """Authentication failed: frames are ignored until the connection closes."""
        return self.authenticator.state is State.FAILED

    @property
    def takes_bare_tokens(self) -> bool:
        """After a v0 SaslHandshake: frames are SASL tokens, for `bare_token`."""
        return self.authenticator.state is State.RAW_TOKENS

    @property
    def principal(self) -> str:
        return self.authenticator.principal

    @property
    def mechanism(self) -> str | None:
        return self.authenticator.mechanism

    def request(self, header: RequestHeader, body: dict) -> Decision:
        """A decoded request before authentication."""
        auth = self.authenticator
        try:
            event = auth.check(header.api_key)
        except IllegalSaslState as e:
            return Decision(refuse=f"{e} (IllegalSaslStateException)")
        if event is Event.AUTHENTICATE:
            return self._token(header, body["auth_bytes"])
        if event is Event.API_VERSIONS:
            auth.api_versions()
            features = self.features(header.api_version) if self.features else None
            body = api_versions_body(features=features)
            return Decision(header=header, response=body, timed=True)
        mechanism = body["mechanism"]
        response = auth.handshake(mechanism, header.api_version)
        decision = Decision(header=header, response=response, timed=True)
        if auth.state is State.FAILED:
            decision.close = f"SASL mechanism {mechanism!r} is not enabled"
        return decision

    def bare_token(self, frame: bytes) -> Decision:
        """A frame after a v0 SaslHandshake: a SASL token without a Kafka header."""
        return self._token(None, frame)

    def _token(self, header: RequestHeader | None, token: bytes) -> Decision:
        response: dict | list
        try:
            out = self.authenticator.authenticate(token, raw=header is None)
        except IllegalSaslState as e:
            return Decision(refuse=f"{e} (IllegalSaslStateException)")
        except AuthenticationFailed as e:
            if header is None:
                return Decision(failure=e)
            response = {
                "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                "error_message": str(e),
                "auth_bytes": e.server_final,
                "session_lifetime_ms": 0,
            }
            return Decision(failure=e, header=header, response=response, timed=True)
        if header is None:
            response = token_frame(out)
        else:
            response = {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "auth_bytes": out,
                "session_lifetime_ms": 0,
            }
        return Decision(
            authenticated=self.passed, header=header, response=response, timed=header is not None
        )
