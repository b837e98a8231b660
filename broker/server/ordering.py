"""Responses of one connection in request order, sans-I/O.

Requests on a connection may complete out of order: a long-polling Fetch or an
acks=all Produce waits while requests sent after it are answered at once. Kafka
clients match responses to requests by order, so a connection answers in request
order: each request that expects an answer takes the next sequence number
(`expect`), its response is filed under that number when ready (`complete`), and
`pop_ready` hands out responses only from the head, stopping at the first request
still waiting. A request that completes with no answer (None) frees its place
without one.

Backpressure: a connection stops reading while `full` (MAX_IN_FLIGHT requests
waiting or answered and not yet written), so one client cannot queue without bound.
"""

from __future__ import annotations

import collections
from typing import Generic, TypeVar

Response = TypeVar("Response")

MAX_IN_FLIGHT = 256

_WAITING = object()  # the place of a request whose answer is not ready
_NO_ANSWER = object()  # the place of a request that completed without one


class ResponseOrder(Generic[Response]):
    """The answers of one connection, released in request order. Owned by its
    connection; not thread-safe."""

    __slots__ = ("_places", "_head", "max_in_flight")

    def __init__(self, max_in_flight: int = MAX_IN_FLIGHT):
        self._places: collections.deque = collections.deque()
        self._head = 0  # sequence number of _places[0]
        self.max_in_flight = max_in_flight

    def expect(self) -> int:
        """Take the next place for a request that will be answered later."""
        self._places.append(_WAITING)
        return self._head + len(self._places) - 1

    def add(self, response: Response) -> None:
        """The next request is answered at once with `response`."""
        self._places.append(response)

    def complete(self, sequence: int, response: Response | None) -> None:
        """File the answer (None: no answer) of the request at `sequence`. A sequence
        dropped by `clear` is ignored: its connection has closed."""
        index = sequence - self._head
        if index < 0:
            return
        if self._places[index] is not _WAITING:
            raise ValueError(f"request {sequence} already completed")
        self._places[index] = _NO_ANSWER if response is None else response

    def pop_ready(self) -> Response | None:
        """The next answer that may be written now, None if the head is waiting (or
        nothing is queued)."""
        places = self._places
        while places and places[0] is not _WAITING:
            response = places.popleft()
            self._head += 1
            if response is not _NO_ANSWER:
                return response
        return None

    def clear(self) -> None:
        """Drop every place (the connection closed); later completions are ignored."""
        self._head += len(self._places)
        self._places.clear()

    def __len__(self) -> int:
        """Requests waiting or answered and not yet handed out."""
        return len(self._places)

    @property
    def full(self) -> bool:
        return len(self._places) >= self.max_in_flight
