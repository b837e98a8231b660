"""A per-process pool of broker clients, keyed by their settings.

Spark reuses its Python workers and keeps the streaming planner process for the
query's lifetime, while a new client costs a connection and its handshakes (tens of
ms each time: ApiVersions, SASL, Metadata), so the source keeps the clients it made
and reuses them; nothing with a socket lives in what Spark pickles. A client whose
use raised is closed instead of given back (its state is unknown); one idle for
longer than `idle_s` is closed when the pool next looks at its settings. (Spark's
Kafka source pools its consumers for the same reasons.)
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class ClientPool(Generic[C]):
    """Clients made by `make(settings)`, given out one borrower at a time."""

    def __init__(self, make: Callable[[dict], C], idle_s: float):
        self._make = make
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._idle: dict[tuple, list[tuple[float, C]]] = {}  # settings -> [(since, client)]

    @contextlib.contextmanager
    def borrowed(self, settings: dict) -> Iterator[C]:
        """A client for `settings`, from the pool (or new), given back after use."""
        key = tuple(sorted((k, str(v)) for k, v in settings.items()))
        now = time.monotonic()
        client: C | None = None
        expired: list[C] = []
        with self._lock:
            idle = self._idle.get(key, [])
            while idle and client is None:
                since, candidate = idle.pop()
                if now - since < self._idle_s:
                    client = candidate
                else:
                    expired.append(candidate)
        for old in expired:
            old.close()
        if client is None:
            client = self._make(settings)
        try:
            yield client
        except BaseException:
            client.close()
            raise
        with self._lock:
            self._idle.setdefault(key, []).append((time.monotonic(), client))

    def close_all(self) -> None:
        """Close every idle client."""
        with self._lock:
            idle = [client for entries in self._idle.values() for _, client in entries]
            self._idle.clear()
        for client in idle:
            client.close()
