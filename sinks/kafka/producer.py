"""The kafka sink's producer: one confluent-kafka Producer, the thread that serves
its delivery reports, and the few calls the delivery strategies make of it.

The strategies (at_least_once.py, exactly_once.py) are written against the two
narrow interfaces below, never against the sink or librdkafka's whole Producer, so
that each can be driven by a fake in a unit test:

- `RoundProducer`: produce a round of records and wait until each one has a
  delivery report (at-least-once);
- `TransactionalProducer`: librdkafka's raw `produce` and the transaction calls
  (exactly-once, where `commit_transaction` is what waits for the reports).

A background thread calls `poll()`, so delivery reports (and the `error_cb` and
`stats_cb` callbacks of the settings) are served without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from itertools import repeat
from operator import length_hint
from typing import Any, Protocol

from sinks.kafka.records import with_headers

PARTITION_ANY = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses
PERMANENT = {
    "MSG_SIZE_TOO_LARGE",
    "_MSG_SIZE_TOO_LARGE",
    "CORRUPT_MESSAGE",
    "INVALID_MSG",
    "INVALID_RECORD",
    "INVALID_MSG_SIZE",
    "RECORD_LIST_TOO_LARGE",
    "INVALID_REQUIRED_ACKS",
}
POLL_INTERVAL_S = 0.1
QUEUE_FULL_WAIT_S = 0.005  # how long to let the poll thread drain a full queue

# A record that failed: (KafkaError, topic, value, key, headers, timestamp in epoch ms)
Failure = tuple[Any, str, bytes, bytes | None, list | None, int]


def is_permanent(err) -> bool:
    """Whether the broker (or librdkafka) refuses the record for good: producing it
    again cannot succeed, so it goes to the dead-letter topic."""
    return err.name() in PERMANENT


class RoundProducer(Protocol):
    async def produce_round(
        self, topic, values, keys=None, headers=None, timestamps=0
    ) -> list[Failure]:
        """Produce `values` once and wait for every delivery report; see SinkProducer."""
        ...


class TransactionalProducer(Protocol):
    """The transaction calls take librdkafka's own time limit, in `seconds`."""

    # librdkafka's produce, positional: (topic, value, key, partition, on_delivery,
    # callback, timestamp, headers); raises BufferError while its queue is full
    produce: Callable[..., None]

    async def init_transactions(self, seconds: float) -> None: ...

    def begin_transaction(self) -> None: ...

    async def commit_transaction(self, seconds: float) -> None: ...

    async def abort_transaction(self, seconds: float) -> None: ...


def _column(column, one: bool, start: int):
    """One of produce's arguments, for the records from `start` on: `column` itself
    for each when `one`, else its list (a copy only when resuming after a full queue)."""
    if one:
        return repeat(column)
    return column[start:] if start else column


class _Tracker:
    """Delivery reports of one produce round. `on_delivery` runs in the poll thread
    (the only writer of `count`/`failed`); the loop thread writes `expected` once.
    Both check for completion; `_finish` on the loop is idempotent."""

    __slots__ = ("count", "expected", "failed", "future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.count = 0
        self.expected = -1
        self.failed: list[tuple] = []
        self.loop = loop
        self.future = loop.create_future()

    def on_delivery(self, err, msg) -> None:
        if err is not None:  # a report carries no headers: produce_round adds them
            self.failed.append((err, msg.topic(), msg.value(), msg.key(), None, msg.timestamp()[1]))
        self.count += 1
        if self.count == self.expected:
            self.loop.call_soon_threadsafe(self._finish)

    def _finish(self) -> None:
        if not self.future.done():
            self.future.set_result(None)

    def seal(self, expected: int) -> None:
        self.expected = expected
        if self.count == expected:
            self._finish()


class SinkProducer:
    """Owns one confluent-kafka Producer and its poll thread, from construction to
    `close`. Used from one sink run's event loop; implements both interfaces."""

    def __init__(self, settings: dict):
        from confluent_kafka import Producer

        self._producer = Producer(settings)
        self.produce = self._producer.produce
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(POLL_INTERVAL_S)

    async def close(self) -> None:
        """Drop what was never sent, stop the poll thread, wait briefly for the rest."""
        self._producer.purge(in_queue=True, in_flight=False)
        self._stop.set()
        await asyncio.to_thread(self._poller.join, 5)
        await asyncio.to_thread(self._producer.flush, 2)

    async def produce_round(
        self, topic, values, keys=None, headers=None, timestamps=0
    ) -> list[Failure]:
        """Produce `values` once, with `topic` one name or one per value, optional
        parallel `keys` and `headers`, and `timestamps` one for all (0: now) or one
        per value; wait for every delivery report; return the failures as (error,
        topic, value, key, headers, timestamp)."""
        from confluent_kafka import KafkaException

        tracker = _Tracker(asyncio.get_running_loop())
        local_failures = []
        i, n = 0, len(values)
        one_topic, one_stamp = isinstance(topic, str), isinstance(timestamps, int)
        # produce's positional arguments as columns, one value per record: (topic,
        # value, key, partition, on_delivery, its alias `callback`, timestamp[,
        # headers]); positional: ~0.25 us less per record than keywords; partition -1
        # lets the partitioner pick. `map` drives produce from C, so a record costs no
        # bytecode of its own: ~3 % less CPU per raw line than a loop in Python
        # (bench/NOTES.md).
        fixed = (repeat(PARTITION_ANY), repeat(tracker.on_delivery), repeat(None))
        while i < n:
            left = iter(_column(values, False, i))
            columns = [_column(topic, one_topic, i), left, _column(keys, keys is None, i)]
            columns += [*fixed, _column(timestamps, one_stamp, i)]
            if headers is not None:
                columns.append(_column(headers, False, i))
            try:
                deque(map(self.produce, *columns), 0)
                i = n
            except BufferError:  # librdkafka's queue is full: let the poll thread drain it
                i = n - length_hint(left) - 1  # the value refused, produced again
                await asyncio.sleep(QUEUE_FULL_WAIT_S)
            except KafkaException as exc:  # refused by librdkafka itself (too large)
                i = n - length_hint(left) - 1
                local_failures.append(
                    (
                        exc.args[0],
                        topic if one_topic else topic[i],
                        values[i],
                        None if keys is None else keys[i],
                        None if headers is None else headers[i],
                        timestamps if one_stamp else timestamps[i],
                    )
                )
                i += 1
        tracker.seal(n - len(local_failures))
        await tracker.future
        failed = tracker.failed
        if failed and headers is not None:
            topics = [topic] * n if one_topic else topic
            failed = with_headers(failed, topics, values, keys or [None] * n, headers)
        return local_failures + failed

    async def init_transactions(self, seconds: float) -> None:
        await asyncio.to_thread(self._producer.init_transactions, seconds)

    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    async def commit_transaction(self, seconds: float) -> None:
        await asyncio.to_thread(self._producer.commit_transaction, seconds)

    async def abort_transaction(self, seconds: float) -> None:
        await asyncio.to_thread(self._producer.abort_transaction, seconds)
