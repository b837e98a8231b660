"""One connection's SASL authentication, as Kafka's SaslServerAuthenticator runs it.

    state            event                       next
    ---------------  --------------------------  ----------------------------------
    HANDSHAKE        ApiVersions                 HANDSHAKE
    HANDSHAKE        SaslHandshake (enabled)     AUTHENTICATE (v1) / RAW_TOKENS (v0)
    HANDSHAKE        SaslHandshake (not served)  FAILED
    AUTHENTICATE     SaslAuthenticate            AUTHENTICATE / COMPLETE / FAILED
    RAW_TOKENS       size-prefixed raw token     RAW_TOKENS / COMPLETE / FAILED
    COMPLETE         any request                 COMPLETE (served normally)

Any other event is illegal (Kafka's IllegalSaslStateException): the connection
closes. SaslHandshake v0 is the pre-KIP-152 path: the SASL tokens that follow are
sent as bare size-prefixed frames, without Kafka headers, and answered the same way.
The SASL gate (broker.server.sasl_gate) drives this; it holds no I/O. Owned by one
connection, event-loop only.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

from broker.protocol import ApiKey, ErrorCode
from broker.sasl.scram import AuthenticationFailed


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_TOKENS = "raw_tokens"
    COMPLETE = "complete"
    FAILED = "failed"


class Event(enum.Enum):
    API_VERSIONS = "api_versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_TOKEN = "raw_token"
    REQUEST = "request"


TRANSITIONS: dict[tuple[State, Event], frozenset[State]] = {
    (State.HANDSHAKE, Event.API_VERSIONS): frozenset({State.HANDSHAKE}),
    (State.HANDSHAKE, Event.HANDSHAKE): frozenset(
        {State.AUTHENTICATE, State.RAW_TOKENS, State.FAILED}
    ),
    (State.AUTHENTICATE, Event.AUTHENTICATE): frozenset(
        {State.AUTHENTICATE, State.COMPLETE, State.FAILED}
    ),
    (State.RAW_TOKENS, Event.RAW_TOKEN): frozenset(
        {State.RAW_TOKENS, State.COMPLETE, State.FAILED}
    ),
    (State.COMPLETE, Event.REQUEST): frozenset({State.COMPLETE}),
}
EVENTS: dict[int, Event] = {
    ApiKey.API_VERSIONS: Event.API_VERSIONS,
    ApiKey.SASL_HANDSHAKE: Event.HANDSHAKE,
    ApiKey.SASL_AUTHENTICATE: Event.AUTHENTICATE,
}


class IllegalSaslState(Exception):
    """A request that is not valid in the current state; the connection closes."""


class SaslServer(Protocol):
    """The server side of one exchange of a mechanism (PlainServer, ScramServer)."""

    user: str | None
    complete: bool

    def evaluate(self, token: bytes) -> bytes: ...


class Authenticator:
    """SASL state of one connection. `mechanisms` maps each enabled mechanism to a
    factory of its server exchange (PlainServer, ScramServer)."""

    def __init__(self, mechanisms: dict[str, Callable[[], SaslServer]]):
        self.mechanisms = mechanisms
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.user: str | None = None
        self._server: SaslServer | None = None

    def _move(self, event: Event, to: State) -> None:
        allowed = TRANSITIONS.get((self.state, event))
        if allowed is None or to not in allowed:
            raise IllegalSaslState(f"{event.value} is not valid in SASL state {self.state.value}")
        self.state = to

    def check(self, api_key: int) -> Event:
        """The event a request is in this state; IllegalSaslState if not allowed."""
        if self.state is State.RAW_TOKENS:
            return Event.RAW_TOKEN
        event = (
            EVENTS.get(api_key, Event.REQUEST)
            if self.state is not State.COMPLETE
            else Event.REQUEST
        )
        if (self.state, event) not in TRANSITIONS:
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else api_key
            raise IllegalSaslState(f"unexpected {name} request in SASL state {self.state.value}")
        return event

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    def api_versions(self) -> None:
        self._move(Event.API_VERSIONS, State.HANDSHAKE)

    def handshake(self, mechanism: str, version: int) -> dict:
        """The SaslHandshake response body; state FAILED when not served."""
        enabled = list(self.mechanisms)
        if mechanism not in self.mechanisms:
            self._move(Event.HANDSHAKE, State.FAILED)
            return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
        self._move(Event.HANDSHAKE, State.AUTHENTICATE if version >= 1 else State.RAW_TOKENS)
        self.mechanism = mechanism
        self._server = self.mechanisms[mechanism]()
        return {"error_code": ErrorCode.NONE, "mechanisms": enabled}

    def authenticate(self, token: bytes, raw: bool = False) -> bytes:
        """The next server token; AuthenticationFailed (state FAILED) ends it."""
        event = Event.RAW_TOKEN if raw else Event.AUTHENTICATE
        if (self.state, event) not in TRANSITIONS:
            raise IllegalSaslState(f"{event.value} is not valid in SASL state {self.state.value}")
        server = self._server
        assert server is not None  # the handshake, which the transitions require, made it
        try:
            out = server.evaluate(token)
        except AuthenticationFailed:
            self.user = server.user
            self._move(event, State.FAILED)
            raise
        self.user = server.user
        self._move(event, State.COMPLETE if server.complete else self.state)
        return out
