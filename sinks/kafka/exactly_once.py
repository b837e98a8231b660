"""Exactly-once delivery for the kafka sink (`delivery: exactly_once`).

Theory of operation. Every take batch becomes one Kafka transaction (KIP-98) that
holds the batch's records AND the position the pipeline reached with them, written
to a compacted positions topic (`positions_topic`, keyed by the transactional id;
positions.py). Either both are committed or neither is, so the broker always knows
exactly which lines it holds; the agent's own position files and channel
checkpoints may lag it, never lead it. At every start the sink:

1. calls `init_transactions`: the broker fences an earlier instance with the same
   `transactional.id` (a zombie) and aborts or completes its open transaction;
2. reads the positions topic in read_committed up to its end: the last committed
   position of this transactional id;
3. hands the sources their positions through `Channel.delivered_marks` (memory
   channel: the sources resume right after the last committed line instead of from
   their position files, which may be up to one save behind), and tells the channel
   to drop what the broker already holds (`Channel.discard_below`): the file channel
   would otherwise replay records a sink committed to Kafka but not yet to its
   checkpoint, and either channel holds the take of a sink that crashed or was
   cancelled between the broker's commit and its own.

A position is what the take's events carry: `Ack.mark` per source and key (the
tail: file identity and the offset after the lines), and `TakeBatch.end_seq` with
the channel's `identity` (sequence numbers are only valid under the identity they
were recorded with: a file channel whose directory was wiped, or a memory channel of
another process, drops nothing). Takes are of whole puts (`whole_puts=True`),
because a mark stands for the whole put it came with.

Transactions cost the broker a dozen requests and replicated writes whatever their
size, so while the channel is not filling up a sink begins at most one per
`commit_interval` (Kafka Streams' `commit.interval.ms` under exactly-once): what
arrives meanwhile waits in the channel and goes in the next, larger transaction. A
lone line after a quiet spell goes at once; a busy source's lines wait at most the
interval.

With the audit on, each transaction also holds the audit totals of the buckets its
records change (audit.py): they are committed exactly when the records are.

Records a broker rejects for good (too large, invalid) make the transaction fail;
it is aborted, the take rolled back, and the next attempt sends those records to
the dead-letter topic instead. Other failures abort and retry after a backoff that
doubles up to `max_retry_backoff`. A fenced or otherwise fatal producer raises: the
take rolls back and the supervisor restarts the sink, which starts again at 1.

Consumers must read with isolation.level=read_committed (librdkafka's default,
Spark's logflume source's default) to see each line exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import time

from agent.api import Channel, Event, TakeBatch
from agent.delivery import encode_all
from common.backoff import Backoff
from sinks.kafka.audit import SinkAudit
from sinks.kafka.config import KafkaSinkConfig
from sinks.kafka.dead_letters import DeadLetterTopic
from sinks.kafka.metrics import KafkaSinkMetrics
from sinks.kafka.positions import (
    CommittedPositions,
    ensure_positions_topic,
    read_positions,
    resolve_sources,
)
from sinks.kafka.producer import (
    PARTITION_ANY,
    QUEUE_FULL_WAIT_S,
    TransactionalProducer,
    is_permanent,
)
from sinks.kafka.records import RecordMaker, Records

INIT_TIMEOUT_S = 30.0  # per init_transactions attempt
COMMIT_TIMEOUT_S = 60.0  # per commit_transaction attempt
ABORT_TIMEOUT_S = 5.0  # aborting when the take rolls back


class ExactlyOnce:
    """The exactly-once take loop of one sink run (its producer is transactional):
    start as the module docstring says, then one transaction per take until
    cancelled. Owns the committed positions; event loop only."""

    def __init__(
        self,
        config: KafkaSinkConfig,
        producer: TransactionalProducer,
        client_settings: dict,
        transactional_id: str,
        records: RecordMaker,
        dead_letters: DeadLetterTopic,
        metrics: KafkaSinkMetrics,
        log: logging.Logger,
        audit: SinkAudit | None = None,
    ):
        self.config = config
        self.producer = producer
        self.client_settings = client_settings  # for the positions topic's clients
        self.transactional_id = transactional_id
        self.records = records
        self.dead_letters = dead_letters
        self.metrics = metrics
        self.log = log
        self.audit = audit

    async def run(self, channel: Channel) -> None:
        cfg, log, conf = self.config, self.log, self.client_settings
        positions = CommittedPositions(self.transactional_id, channel.identity)
        await asyncio.to_thread(ensure_positions_topic, conf, cfg.positions_topic, log)
        await self.producer.init_transactions(INIT_TIMEOUT_S)
        await asyncio.to_thread(read_positions, conf, cfg.positions_topic, positions, log)
        await resolve_sources(channel, positions, log)
        counters = self.metrics.counters
        interval = float(cfg.commit_interval)
        while True:
            take = await channel.take(cfg.batch_events, 0.5, whole_puts=True)
            began = time.monotonic()
            if take.events:
                try:
                    records = positions.records_for(take)
                    await self.deliver(take.events, records)
                except BaseException:
                    counters.rollbacks.inc()
                    await asyncio.shield(self._abort_and_roll_back(take))
                    raise
                positions.apply(records)
            await take.commit()
            counters.out.inc(len(take.events))
            if take.events and len(take.events) < cfg.batch_events:
                # the channel keeps what arrives meanwhile for the next transaction
                await asyncio.sleep(began + interval - time.monotonic())

    async def _abort_and_roll_back(self, take: TakeBatch) -> None:
        from confluent_kafka import KafkaException

        try:
            await self.producer.abort_transaction(ABORT_TIMEOUT_S)
        except KafkaException:
            pass  # no transaction open, or the producer is fenced: the broker aborts it
        await take.rollback()

    async def deliver(self, events: list[Event], records: list[tuple[bytes, bytes]]) -> None:
        """Commit one transaction holding `events`, the position `records` and the
        audit totals the events change; retry aborted attempts, dead-lettering the
        records the broker refused for good."""

        cfg, producer = self.config, self.producer
        out = self.records.make(events, encode_all(cfg.format, events))
        values = out.values
        sent = self.audit.produced(out) if self.audit is not None else out
        # records whose template names a missing field: to the dead-letter topic, each try
        dead = self.dead_letters.records_of(out.dead)
        rejected: dict[bytes, object] = {}  # value -> the error that refused it for good
        backoff = Backoff(float(cfg.retry_backoff), float(cfg.max_retry_backoff))
        started = time.monotonic()
        while True:
            failed: list[tuple] = []  # (error, value), appended by the poll thread

            def on_delivery(err, msg, failed=failed) -> None:
                if err is not None:
                    failed.append((err, msg.value()))

            producer.begin_transaction()
            i = 0
            while i < len(sent.values):
                i = self._produce_from(sent, i, rejected, on_delivery)
                if i < len(sent.values):  # librdkafka's queue is full: the poll thread drains
                    await asyncio.sleep(QUEUE_FULL_WAIT_S)
            for topic, value, key, headers in dead:
                await self._produce(topic, value, key, headers, on_delivery)
            for key, value in records:
                await self._produce(cfg.positions_topic, value, key, None, on_delivery)
            delta, sources = {}, []
            if self.audit is not None:
                skip = {i for i, v in enumerate(values) if v in rejected} if rejected else ()
                delta = self.audit.delivered(out, skip)
                sources = self.audit.take_sources()
            try:
                if self.audit is not None:
                    pairs = self.audit.records(delta) + self.audit.source_records(sources)
                    for key, value in pairs:
                        await self._produce(self.audit.topic, value, key, None, on_delivery)
                err = await self._try_commit()
            except BaseException:
                if self.audit is not None:  # not committed: a later transaction takes them
                    self.audit.restore_sources(sources)
                raise
            if err is not None:
                if self.audit is not None:
                    self.audit.restore_sources(sources)
                await producer.abort_transaction(COMMIT_TIMEOUT_S)
            else:
                if self.audit is not None:
                    self.audit.apply(delta)
                self.metrics.ack_latency.observe(time.monotonic() - started)
                return
            for error, value in failed:
                if is_permanent(error) and value not in rejected:
                    rejected[value] = error
            self.metrics.retried.inc(len(values) - len(rejected))
            delay = backoff.next()
            self.log.warning(
                "transaction of %d records aborted (%s); retrying in %.1fs",
                len(values),
                err,
                delay,
            )
            await asyncio.sleep(delay)

    async def _try_commit(self):
        """`_commit`; the error of a commit that failed and is to be aborted (None when
        committed). A fatal error raises."""
        from confluent_kafka import KafkaException

        try:
            await self._commit()
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                raise
            return err
        return None

    async def _commit(self) -> None:
        """commit_transaction, called again while it fails with a retriable error (a
        timeout: the commit may be under way, and aborting then could not undo it)."""
        from confluent_kafka import KafkaException

        while True:
            try:
                await self.producer.commit_transaction(COMMIT_TIMEOUT_S)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() or err.txn_requires_abort():
                    raise
                self.log.warning("commit of a transaction: %s; trying again", err)

    def _produce_from(self, out: Records, i: int, rejected: dict, on_delivery) -> int:
        """Produce `out.values[i:]` (refused ones to the dead-letter topic) until
        librdkafka's queue is full; return the index of the first value not produced."""
        from confluent_kafka import KafkaException

        produce, values, n = self.producer.produce, out.values, len(out.values)
        topics, keys, headers, stamps = out.topic, out.keys, out.headers, out.timestamps
        while i < n:
            value = values[i]
            topic = topics if isinstance(topics, str) else topics[i]
            key = keys[i] if keys is not None else None
            hdrs = headers[i] if headers is not None else None
            ts = stamps if isinstance(stamps, int) else stamps[i]
            refusal = rejected.get(value) if rejected else None
            try:
                if refusal is None:  # (..., on_delivery, its alias, timestamp, headers)
                    produce(topic, value, key, PARTITION_ANY, on_delivery, None, ts, hdrs)
                else:
                    dlq, dead, key, hdrs = self.dead_letters.record(
                        refusal.name(), topic, value, key, hdrs
                    )
                    produce(dlq, dead, key, PARTITION_ANY, on_delivery, None, ts, hdrs)
            except BufferError:
                return i
            except KafkaException as exc:  # refused by librdkafka itself (too large)
                if refusal is not None or not is_permanent(exc.args[0]):
                    raise
                rejected[value] = exc.args[0]
                continue  # this value again, to the dead-letter topic
            i += 1
        return n

    async def _produce(self, topic, value, key, headers, on_delivery) -> None:
        """One produce, waiting while librdkafka's queue is full."""
        while True:
            try:
                self.producer.produce(topic, value, key, headers=headers, on_delivery=on_delivery)
                return
            except BufferError:
                await asyncio.sleep(QUEUE_FULL_WAIT_S)
