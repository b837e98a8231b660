"""Request dispatch: a table of handlers keyed by ApiKey, filled by handler modules.

Every module in `broker/server/handlers/` is imported by `load_handlers()` (the
server calls it once) and registers its functions with `@handles(ApiKey.X, ...)`. A handler is called as
`handler(ctx, body)` with a `RequestContext` and the decoded request body (a dict
with Kafka's snake_case field names) and returns:

- a response body dict, or
- None for "no response" (acks=0 produce), or
- an awaitable resolving to either (requests that wait: long-poll fetch, acks=all).

A handler raises `CloseConnection` to drop the client's connection (e.g. a failed
acks=0 produce, which has no other way to report errors).

Adding an area = dropping a new module in `handlers/` that registers its keys, and
giving each key its row of authorization checks in `broker/server/api_acls.py` (a
test fails on a served key without one); two registrations of one key are a
programming error. Handler modules hold no state: the services they use (the group
coordinator, the cluster view, ...) are the typed attributes of `ctx.core`, built by
the composition root (`broker.server.core`).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from broker.protocol.header import RequestHeader

if TYPE_CHECKING:
    from broker.server.core import BrokerCore

Body = dict[str, Any]
Handler = Callable[["RequestContext", Body], Body | None | Awaitable[Body | None]]


class CloseConnection(Exception):
    """Raised by a handler to close the client's connection without a response."""


@dataclasses.dataclass(slots=True)
class RequestContext:
    """What a handler knows about one request. Created per request; event-loop only."""

    core: BrokerCore
    header: RequestHeader
    client_host: str
    client_port: int
    listener: str = "PLAINTEXT"  # name of the listener the request arrived on
    principal: str = "User:ANONYMOUS"  # who sent it (broker.server.principal)
    request_size: int = 0  # bytes of the request frame (the produce quota counts them)
    throttle_ms: int = 0  # set by a handler whose client exceeded its quota (broker.quotas)
    # (name, version) the client gave in ApiVersions v3+ on this connection, if it did
    client_software: tuple[str, str] | None = None

    @property
    def api_version(self) -> int:
        return self.header.api_version


_handlers: dict[int, Handler] = {}
_modules: list[ModuleType] = []


def handles(*api_keys: int) -> Callable[[Handler], Handler]:
    """Register the decorated function for `api_keys`."""

    def register(fn: Handler) -> Handler:
        for key in api_keys:
            if key in _handlers and _handlers[key] is not fn:
                raise RuntimeError(f"two handlers for api key {key}: {_handlers[key]} and {fn}")
            _handlers[int(key)] = fn
        return fn

    return register


async def answer_when_written(written: Awaitable, response: dict) -> dict:
    """A handler's answer once `written` (a store's write of the change it answers)
    is done: what a handler returns when its store writes in the background."""
    await written
    return response


def load_handlers() -> list[ModuleType]:
    """Import every handler module once; returns them in name order."""
    if not _modules:
        import broker.server.handlers as pkg

        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
            _modules.append(importlib.import_module(f"{pkg.__name__}.{info.name}"))
    return list(_modules)


def lookup(api_key: int) -> Handler | None:
    return _handlers.get(api_key)
