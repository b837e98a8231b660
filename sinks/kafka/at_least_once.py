"""At-least-once delivery for the kafka sink (`delivery: at_least_once`, the default).

Theory of operation:

- Up to `max_inflight_batches` take transactions are open at once. Each batch is
  produced in one tight loop (value = encoded event; topic, key and headers made by
  records.py) with a per-batch delivery callback (`RoundProducer.produce_round`).
- A batch is committed to the channel only when EVERY record of it has a delivery
  report, i.e. the broker acknowledged it as `acks` says, so whatever sits in
  librdkafka's queue is never counted as delivered. Batches commit in take order.
- Failed records are sorted: permanent rejections (record too large, corrupt,
  invalid) go to the dead-letter topic (dead_letters.py) and are counted, as are
  records whose topic or key template names a missing field; anything else
  (timeouts, broker down, leader moves) is produced again after a backoff that
  doubles up to `max_retry_backoff`, still inside the same take transaction. A fatal
  producer error raises, the batches roll back, and the supervisor restarts the
  sink with a fresh producer.
- After a batch is acknowledged, the audit totals it changed are published
  (audit.py) before the batch is committed to the channel.
- With `enable_idempotence` (the default; needs `acks: all`) the broker drops the
  duplicates librdkafka's own retries could create within a producer session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from agent.api import Channel
from agent.delivery import encode_all
from common.backoff import Backoff
from sinks.kafka.audit import SinkAudit, dead_indexes
from sinks.kafka.config import KafkaSinkConfig
from sinks.kafka.dead_letters import DeadLetterTopic
from sinks.kafka.metrics import KafkaSinkMetrics
from sinks.kafka.producer import Failure, RoundProducer, is_permanent
from sinks.kafka.records import RecordMaker

AGE_REFRESH_S = 1.0  # the oldest-undelivered gauge is at most this stale
AUDIT_LOG_INTERVAL_S = 30.0  # most one warning about unacknowledged audit records per this


class AtLeastOnce:
    """The take loop of one sink run: owns its open take batches; event loop only."""

    def __init__(
        self,
        config: KafkaSinkConfig,
        producer: RoundProducer,
        records: RecordMaker,
        dead_letters: DeadLetterTopic,
        metrics: KafkaSinkMetrics,
        log: logging.Logger,
        audit: SinkAudit | None = None,
    ):
        self.config = config
        self.producer = producer
        self.records = records
        self.dead_letters = dead_letters
        self.metrics = metrics
        self.log = log
        self.audit = audit
        self._audit_lock = asyncio.Lock()
        self._audit_logged = -AUDIT_LOG_INTERVAL_S  # monotonic time of the last warning

    async def run(self, channel: Channel) -> None:
        """Take, deliver and commit in take order until cancelled or a delivery fails."""
        cfg, counters = self.config, self.metrics.counters
        inflight: deque[tuple] = deque()  # (take batch, delivery task, monotonic time taken)
        take_task: asyncio.Task | None = None
        try:
            while True:
                while inflight and inflight[0][1].done():
                    # a failed delivery raises while its batch is still in flight,
                    # so _abort rolls the batch back
                    inflight[0][1].result()
                    batch = inflight.popleft()[0]
                    await batch.commit()
                    counters.out.inc(len(batch.events))
                self.metrics.oldest_age.set(time.monotonic() - inflight[0][2] if inflight else 0)
                waiters = set()
                if len(inflight) < cfg.max_inflight_batches:
                    if take_task is None:
                        take_task = asyncio.create_task(channel.take(cfg.batch_events, 0.5))
                    waiters.add(take_task)
                if inflight:
                    waiters.add(inflight[0][1])
                await asyncio.wait(
                    waiters, timeout=AGE_REFRESH_S, return_when=asyncio.FIRST_COMPLETED
                )
                if take_task is not None and take_task.done():
                    batch, take_task = take_task.result(), None
                    if batch.events:
                        task = asyncio.create_task(self.deliver(batch.events))
                        inflight.append((batch, task, time.monotonic()))
                    else:
                        await batch.commit()
        except BaseException:
            await asyncio.shield(self._abort(inflight, take_task))
            raise

    async def _abort(self, inflight: deque, take_task: asyncio.Task | None) -> None:
        """Roll back every open take (newest first, so the channel keeps the order)."""
        if take_task is not None:
            take_task.cancel()
            await asyncio.wait({take_task})
            if not take_task.cancelled() and take_task.exception() is None:
                inflight.append((take_task.result(), None, None))
        for batch, task, _ in reversed(inflight):
            if task is not None:
                task.cancel()
            self.metrics.counters.rollbacks.inc()
            await batch.rollback()

    async def deliver(self, events) -> None:
        """Produce `events` until each one is acknowledged or dead-lettered; then
        publish the audit totals they changed."""
        cfg, dlq = self.config, self.dead_letters
        out = self.records.make(events, encode_all(cfg.format, events))
        backoff = Backoff(float(cfg.retry_backoff), float(cfg.max_retry_backoff))
        started = time.monotonic()
        retry = [(*r, 0) for r in dlq.records_of(out.dead)]  # (topic, value, key, headers, ts)
        dead_lettered: list[tuple[str, bytes]] = []  # (topic, value) of out's records
        sent, delta = out, None
        if self.audit is not None:
            sent = self.audit.produced(out)
            # hashed now, while the values are in the CPU's caches (encoded or read
            # just before); applied only once the broker acknowledged them
            delta = self.audit.delivered(out)
        failed = await self.producer.produce_round(
            sent.topic, sent.values, sent.keys, sent.headers, sent.timestamps
        )
        while failed or retry:
            for err, rtopic, value, key, headers, ts in await self._isolate(failed):
                if not is_permanent(err):
                    retry.append((rtopic, value, key, headers, ts))
                elif rtopic != dlq.name:
                    dead_lettered.append((rtopic, value))
                    retry.append((*dlq.record(err.name(), rtopic, value, key, headers), ts))
                else:
                    self.metrics.counters.failed.inc()
                    self.log.error("dead-letter topic rejected a record: %s", err)
            retried = sum(1 for r in retry if r[0] != dlq.name)
            if retried:
                self.metrics.retried.inc(retried)
                delay = backoff.next()
                self.log.warning(
                    "%d records not acknowledged (%s); retrying in %.1fs",
                    retried,
                    failed[0][0],
                    delay,
                )
                await asyncio.sleep(delay)
            if not retry:
                break
            topics, values, keys, headers, stamps = map(list, zip(*retry, strict=True))
            retry = []
            failed = await self.producer.produce_round(topics, values, keys, headers, stamps)
        self.metrics.ack_latency.observe(time.monotonic() - started)
        if self.audit is not None:
            if dead_lettered:
                delta = self.audit.delivered(out, dead_indexes(out, dead_lettered))
            assert delta is not None  # computed above, with the audit on
            self.audit.apply(delta)
            await self.publish_audit()

    async def publish_audit(self) -> None:
        """Produce the totals of the buckets changed since the last publication and
        wait for them; one publication at a time, so that the last record of a key
        in the topic is its latest total. What fails is published the next time."""
        audit = self.audit
        assert audit is not None
        async with self._audit_lock:
            sources = audit.take_sources()
            if not audit.dirty and not sources:
                return
            buckets, audit.dirty = audit.dirty, set()
            pairs = audit.records({}, buckets) + audit.source_records(sources)
            keys, values = zip(*pairs, strict=True)
            failed = await self.producer.produce_round(audit.topic, list(values), list(keys))
            if failed:
                audit.dirty |= buckets
                audit.restore_sources(sources)
                self.metrics.audit_failures.inc()
                now = time.monotonic()
                if now - self._audit_logged >= AUDIT_LOG_INTERVAL_S:
                    self._audit_logged = now
                    self.log.warning(
                        "audit records to %s not acknowledged (%s); sent again with the next "
                        "batch (is the topic writable by this agent's user? audit: false "
                        "turns the audit off)",
                        audit.topic,
                        failed[0][0],
                    )

    async def _isolate(self, failed: list[Failure]) -> list[Failure]:
        """A broker rejects a whole batch when one record in it is too large, and
        librdkafka does not split batches: produce each permanently rejected record
        again on its own, so only the guilty ones reach the dead-letter topic."""
        for err, *_ in failed:
            if err.fatal():
                raise RuntimeError(f"fatal producer error: {err}")
        suspects = [f for f in failed if is_permanent(f[0]) and f[1] != self.dead_letters.name]
        if len(suspects) < 2:
            return failed
        guilty = {id(f) for f in suspects}
        out = [f for f in failed if id(f) not in guilty]
        for _, topic, value, key, headers, ts in suspects:
            out += await self.producer.produce_round(topic, [value], [key], [headers], [ts])
        return out
