"""The dead-letter topic of the kafka sink: the record that stands for one the sink
could not deliver (refused for good by the broker, or whose topic or key could not
be made), with the original's headers and `x-error`, `x-topic`, `x-size`."""

from __future__ import annotations

import logging

from sinks.kafka.metrics import KafkaSinkMetrics
from sinks.kafka.records import DeadLetter

# A record to produce: (topic, value, key, headers)
Record = tuple[str, bytes, bytes | None, list | None]


class DeadLetterTopic:
    """Makes and counts dead-letter records for one sink; used from its event loop."""

    def __init__(self, name: str, max_bytes: int, metrics: KafkaSinkMetrics, log: logging.Logger):
        self.name = name
        self.max_bytes = max_bytes  # dead-lettered values are cut to this
        self._metrics = metrics
        self._log = log

    def record(self, reason: str, topic, value, key, headers, log=True) -> Record:
        """The dead-letter record of a record `reason` (x-error) kept from `topic`,
        counted."""
        self._metrics.dead.inc()
        self._metrics.counters.failed.inc()
        size = len(value or b"")
        if log:
            self._log.warning(
                "record of %d bytes rejected by %s (%s): to %s", size, topic, reason, self.name
            )
        headers = [*(headers or ()), ("x-error", reason.encode()), ("x-topic", topic.encode())]
        headers.append(("x-size", str(size).encode()))
        return self.name, (value or b"")[: self.max_bytes], key, headers

    def records_of(self, unmade: list[DeadLetter]) -> list[Record]:
        """The dead-letter records of the records RecordMaker could not make, logged
        once for the batch."""
        out = [self.record(*d, log=False) for d in unmade]
        if out:
            self._log.warning("%d records to %s: %s", len(out), self.name, unmade[0].reason)
        return out
