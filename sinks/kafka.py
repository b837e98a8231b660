"""The `kafka` sink: take batches from a channel and produce them to a Kafka topic.

Works against the bundled broker or any Kafka-compatible cluster, through
confluent-kafka (librdkafka); `type: broker`, its first name, is kept as an alias.
Theory of operation:

- Up to `max_inflight_batches` take transactions are open at once. Each batch is
  produced in one tight loop (value = encoded event; topic, key and headers made by
  sinks/_kafka_records.py) with a per-batch delivery callback; a background thread
  calls `producer.poll()`, so delivery reports are served without blocking the loop.
- A batch is committed to the channel only when EVERY record of it has a delivery
  report, i.e. the broker acknowledged it as `acks` says, so whatever sits in
  librdkafka's queue is never counted as delivered. Batches commit in take order.
- Failed records are sorted: permanent rejections (record too large, corrupt,
  invalid) go to the dead-letter topic (value cut to `dead_letter_max_bytes`, with
  the record's own headers and `x-error`, `x-topic`, `x-size`) and are counted, as
  are records whose topic or key template names a missing field (`x-error:
  MISSING_FIELD: <name> (...)`); anything else (timeouts,
  broker down, leader moves) is produced again after a backoff that doubles up to
  `max_retry_backoff`, still inside the same take transaction. A fatal producer
  error raises, the batches roll back, and the supervisor restarts the sink with a
  fresh producer.
- With `enable_idempotence` (the default; needs `acks: all`) the broker drops the
  duplicates librdkafka's own retries could create within a producer session.

Security follows Kafka's listeners: a `tls:` block makes the connection SSL, a
`sasl:` block SASL_PLAINTEXT, both SASL_SSL. The SASL password is kept out of the
config's repr, so neither logs nor `agent validate` ever show it; give it as
`${LOGFLUME_SASL_PASSWORD}` or `${file:/etc/logflume/sasl-password}` (agent/config.py).
A wrong password is an authentication error librdkafka reports through `error_cb`:
logged and counted in logflume_agent_kafka_auth_failures_total; the records stay in
the channel and are delivered once the credentials are fixed (reload or restart).

What explains a stalled sink is exported as gauges: librdkafka's statistics (every
`statistics.interval.ms`, 5 s unless `producer:` says otherwise; 0 turns them off)
give the producer queue's depth and, per broker, connection state, round-trip time
and requests waiting to be sent (sinks/_kafka_stats.py); the sink itself gives the age
of its oldest in-flight take batch, refreshed at least every AGE_REFRESH_S.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections import deque
from typing import Literal

from agent.api import Channel, Duration, Sink, Size, register
from agent.delivery import Format, SinkCounters, encode_all
from common.backoff import Backoff
from common.hostname import this_host
from common.topic_names import POSITIONS_TOPIC, dead_letter_topic
from sinks._kafka_records import RecordMaker, config_problems, with_headers
from sinks._kafka_security import SaslConfig, TlsConfig, librdkafka_security, unreadable
from sinks._kafka_stats import ProducerStats
from sinks._kafka_txn import run_transactions
from sinks.templates import parse

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
STATS_INTERVAL_MS = 5000  # librdkafka statistics.interval.ms unless `producer:` sets it
AGE_REFRESH_S = 1.0  # the oldest-undelivered gauge is at most this stale
AUTH_LOG_INTERVAL_S = 30.0  # most one "authentication failed" line per this


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
        if err is not None:  # a report carries no headers: _produce_round adds them
            self.failed.append((err, msg.topic(), msg.value(), msg.key(), None))
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


@register("sink", "kafka", aliases=("broker",))
class KafkaSink(Sink):
    """Owns one confluent-kafka Producer and its poll thread."""

    @dataclasses.dataclass
    class Config:
        topic: str  # topic to produce to; a template such as `nginx-{host}` picks one per record
        bootstrap_servers: str = "127.0.0.1:9092"  # brokers to connect to: host:port,host:port
        acks: Literal["all", -1, 0, 1] = "all"  # all, -1: all in-sync replicas; 1: leader; 0: none
        compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "lz4"  # codec of batches
        batch_size: Size = Size(1_000_000)  # most bytes per produce batch (librdkafka batch.size)
        linger_ms: int = 5  # milliseconds to wait for more records before sending a batch
        key: str | None = None  # record key, a template such as `{host}`; null: no key
        headers: list[str] = dataclasses.field(
            default_factory=lambda: ["host"]
        )  # event headers sent as record headers, those an event has; []: none
        enable_idempotence: bool = True  # broker drops duplicates of retries; needs acks: all
        format: Format = "auto"  # auto: JSON if parsed, else the line; raw: the line; json: JSON
        dead_letter_topic: str | None = None  # rejected records; null: `<topic>.dlq` (plain topic)
        dead_letter_max_bytes: Size = Size(64 << 10)  # dead-lettered values are cut to this
        retry_backoff: Duration = Duration(0.5)  # first wait before failed records are sent again
        max_retry_backoff: Duration = Duration(30)  # the wait doubles on each retry up to this
        delivery_timeout: Duration = Duration(30)  # records not acknowledged in this fail (retried)
        batch_events: int = 10_000  # most events per take from the channel
        max_inflight_batches: int = 4  # most take batches in delivery at once
        tls: TlsConfig | None = None  # connect over TLS (SSL); null: no TLS
        sasl: SaslConfig | None = None  # authenticate with SASL; null: no SASL
        producer: dict[str, str] = dataclasses.field(default_factory=dict)  # librdkafka settings
        delivery: Literal["at_least_once", "exactly_once"] = (
            "at_least_once"  # exactly_once: transactions
        )
        transactional_id: str | None = None  # exactly_once: null: logflume-<host>-<agent>-<sink>
        positions_topic: str = POSITIONS_TOPIC  # exactly_once: topic of committed positions
        transaction_timeout: Duration = Duration(60)  # exactly_once: broker aborts older ones
        commit_interval: Duration = Duration(0.5)  # exactly_once: most one transaction per this

    @classmethod
    def validate(cls, config) -> list[str]:
        errors = []
        if config.enable_idempotence and config.acks not in ("all", -1):
            errors.append("enable_idempotence: needs acks: all (or set it to false)")
        if config.delivery == "exactly_once" and not (
            config.enable_idempotence and config.acks in ("all", -1)
        ):
            errors.append("delivery: exactly_once needs acks: all and enable_idempotence: true")
        if config.batch_events < 1 or config.max_inflight_batches < 1:
            errors.append("batch_events: batch_events and max_inflight_batches must be >= 1")
        if not config.topic:
            errors.append("topic: must not be empty")
        else:
            errors += config_problems(config.topic, config.key, config.dead_letter_topic)
        tls = config.tls
        if tls is not None:
            if (tls.cert is None) != (tls.key is None):
                errors.append("tls.key: cert and key go together")
            for name in ("ca", "cert", "key"):
                path = getattr(tls, name)
                problem = path is not None and unreadable(path)
                if problem:
                    errors.append(f"tls.{name}: {problem}")
        if config.sasl is not None and not config.sasl.password:
            errors.append("sasl.password: must not be empty")
        return errors

    def __init__(self, config, context):
        super().__init__(config, context)
        self.counters = SinkCounters(context)
        m, c = context.metrics, context.name
        self.ack_latency = m.histogram(
            "logflume_agent_broker_ack_latency_seconds",
            "Time from producing a take batch to the last broker acknowledgement",
            component=c,
        )
        self.dead = m.counter(
            "logflume_agent_broker_dead_lettered_total",
            "Records sent to the dead-letter topic",
            component=c,
        )
        self.retried = m.counter(
            "logflume_agent_broker_retried_total",
            "Records produced again after a failure",
            component=c,
        )
        self.oldest_age = m.gauge(
            "logflume_agent_oldest_undelivered_event_age_seconds",
            "Time since the sink took its oldest batch not yet acknowledged (0: none)",
            component=c,
        )
        self.auth_failures = m.counter(
            "logflume_agent_kafka_auth_failures_total",
            "Authentication failures reported by the producer (wrong SASL credentials, TLS)",
            component=c,
        )
        self._auth_logged = -AUTH_LOG_INTERVAL_S  # monotonic time of the last such line
        self.stats = ProducerStats(m, c, context.log)
        self.dlq_topic = config.dead_letter_topic or dead_letter_topic(config.topic)
        key = parse(config.key) if config.key is not None else None
        self.records = RecordMaker(parse(config.topic), key, config.headers)
        self.producer = None

    @classmethod
    def records_positions(cls, config) -> bool:
        return config.delivery == "exactly_once"

    @property
    def transactional_id(self) -> str:
        """With the host name by default: agents installed on many hosts from one
        pipelines.yaml must neither fence each other nor share positions."""
        default = f"logflume-{this_host()}-{self.context.agent}-{self.context.name}"
        return self.config.transactional_id or default

    def client_config(self) -> dict:
        """Where and how to connect: what every client of this sink shares."""
        conf = {
            "bootstrap.servers": self.config.bootstrap_servers,
            "client.id": f"logflume-{self.context.agent}-{self.context.name}",
            **librdkafka_security(self.config.tls, self.config.sasl),
        }
        for key, value in self.config.producer.items():
            if key.startswith(("security.", "ssl.", "sasl.")):
                conf[key] = value
        return conf

    def _producer_config(self) -> dict:
        cfg = self.config
        conf = {
            **self.client_config(),
            "acks": str(cfg.acks),
            "compression.type": cfg.compression,
            "batch.size": int(cfg.batch_size),
            "linger.ms": cfg.linger_ms,
            "enable.idempotence": cfg.enable_idempotence,
            "delivery.timeout.ms": int(cfg.delivery_timeout * 1000),
            "queue.buffering.max.messages": max(
                100_000, 2 * cfg.batch_events * cfg.max_inflight_batches
            ),
            "queue.buffering.max.kbytes": 1 << 20,
            "message.max.bytes": 1_000_000,
            "error_cb": self._on_error,
            "statistics.interval.ms": STATS_INTERVAL_MS,
            "stats_cb": self.stats.on_stats,
        }
        if cfg.delivery == "exactly_once":
            conf["transactional.id"] = self.transactional_id
            conf["transaction.timeout.ms"] = int(cfg.transaction_timeout * 1000)
        conf.update(self.config.producer)
        return conf

    def _on_error(self, err) -> None:
        from confluent_kafka import KafkaError

        if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            # librdkafka reconnects at once after a refused login, many times a second:
            # every failure is counted, one is logged per AUTH_LOG_INTERVAL_S
            self.auth_failures.inc()
            now = time.monotonic()
            if now - self._auth_logged >= AUTH_LOG_INTERVAL_S:
                self._auth_logged = now
                self.context.log.error("producer: authentication failed: %s", err.str())
            return
        self.context.log.warning("producer: %s", err)

    async def run(self, channel: Channel) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(self._producer_config())
        stop = threading.Event()
        poller = threading.Thread(target=self._poll, args=(stop,), daemon=True)
        poller.start()
        try:
            if self.config.delivery == "exactly_once":
                await run_transactions(self, channel)
            else:
                await self._loop(channel)
        finally:
            self.producer.purge(in_queue=True, in_flight=False)
            stop.set()
            await asyncio.to_thread(poller.join, 5)
            await asyncio.to_thread(self.producer.flush, 2)
            self.oldest_age.set(0)

    def _poll(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.producer.poll(0.1)

    async def _loop(self, channel: Channel) -> None:
        cfg = self.config
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
                    self.counters.out.inc(len(batch.events))
                self.oldest_age.set(time.monotonic() - inflight[0][2] if inflight else 0)
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
                        task = asyncio.create_task(self._deliver(batch.events))
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
            self.counters.rollbacks.inc()
            await batch.rollback()

    async def _deliver(self, events) -> None:
        """Produce `events` until each one is acknowledged or dead-lettered."""
        cfg = self.config
        out = self.records.make(events, encode_all(cfg.format, events))
        backoff = Backoff(float(cfg.retry_backoff), float(cfg.max_retry_backoff))
        started = time.monotonic()
        retry = [self.dead_letter(*d, log=False) for d in out.dead]
        if retry:
            self.context.log.warning(
                "%d records to %s: %s", len(retry), self.dlq_topic, out.dead[0].reason
            )
        failed = await self._produce_round(out.topic, out.values, out.keys, out.headers)
        while failed or retry:
            for err, rtopic, value, key, headers in await self._isolate(failed):
                if err.name() not in PERMANENT:
                    retry.append((rtopic, value, key, headers))
                elif rtopic != self.dlq_topic:
                    retry.append(self.dead_letter(err.name(), rtopic, value, key, headers))
                else:
                    self.counters.failed.inc()
                    self.context.log.error("dead-letter topic rejected a record: %s", err)
            retried = sum(1 for r in retry if r[0] != self.dlq_topic)
            if retried:
                self.retried.inc(retried)
                delay = backoff.next()
                self.context.log.warning(
                    "%d records not acknowledged (%s); retrying in %.1fs",
                    retried,
                    failed[0][0],
                    delay,
                )
                await asyncio.sleep(delay)
            if not retry:
                break
            topics, values, keys, headers = map(list, zip(*retry, strict=True))
            retry = []
            failed = await self._produce_round(topics, values, keys, headers)
        self.ack_latency.observe(time.monotonic() - started)

    async def _isolate(self, failed: list[tuple]) -> list[tuple]:
        """A broker rejects a whole batch when one record in it is too large, and
        librdkafka does not split batches: produce each permanently rejected record
        again on its own, so only the guilty ones reach the dead-letter topic."""
        for err, *_ in failed:
            if err.fatal():
                raise RuntimeError(f"fatal producer error: {err}")
        suspects = [f for f in failed if f[0].name() in PERMANENT and f[1] != self.dlq_topic]
        if len(suspects) < 2:
            return failed
        guilty = {id(f) for f in suspects}
        out = [f for f in failed if id(f) not in guilty]
        for _, topic, value, key, headers in suspects:
            out += await self._produce_round(topic, [value], [key], [headers])
        return out

    def dead_letter(self, reason: str, topic, value, key, headers, log=True) -> tuple:
        """The dead-letter record of a record `reason` (x-error) kept from `topic`:
        (topic, value, key, headers), counted."""
        self.dead.inc()
        self.counters.failed.inc()
        size = len(value or b"")
        if log:
            self.context.log.warning(
                "record of %d bytes rejected by %s (%s): to %s", size, topic, reason, self.dlq_topic
            )
        headers = [*(headers or ()), ("x-error", reason.encode()), ("x-topic", topic.encode())]
        headers.append(("x-size", str(size).encode()))
        return self.dlq_topic, (value or b"")[: self.config.dead_letter_max_bytes], key, headers

    async def _produce_round(self, topic, values, keys=None, headers=None) -> list[tuple]:
        """Produce `values` once, with `topic` one name or one per value, and optional
        parallel `keys` and `headers`; wait for every delivery report; return the
        failures as (error, topic, value, key, headers)."""
        from confluent_kafka import KafkaException

        tracker = _Tracker(asyncio.get_running_loop())
        cb = tracker.on_delivery
        produce = self.producer.produce
        local_failures = []
        i, n = 0, len(values)
        lean = keys is None and headers is None and isinstance(topic, str)
        if not lean:  # parallel lists, and produce's positional arguments
            topics = [topic] * n if isinstance(topic, str) else topic
            keys = [None] * n if keys is None else keys
            hdrs = [None] * n if headers is None else headers
        while i < n:
            try:
                if lean:  # the common case: one topic, no key, no headers
                    # positional (value, key, partition, on_delivery): ~0.25 us less
                    # per record than keywords; partition -1 lets the partitioner pick
                    for i in range(i, n):  # noqa: B020 - resumes after a full queue
                        produce(topic, values[i], None, PARTITION_ANY, cb)
                else:  # (..., on_delivery, its alias `callback`, timestamp 0: now, headers)
                    for i in range(i, n):  # noqa: B020
                        produce(topics[i], values[i], keys[i], PARTITION_ANY, cb, None, 0, hdrs[i])
                i = n
            except BufferError:  # librdkafka's queue is full: let the poll thread drain it
                await asyncio.sleep(0.005)
            except KafkaException as exc:
                if lean:
                    local_failures.append((exc.args[0], topic, values[i], None, None))
                else:
                    local_failures.append((exc.args[0], topics[i], values[i], keys[i], hdrs[i]))
                i += 1
        tracker.seal(n - len(local_failures))
        await tracker.future
        failed = tracker.failed
        if failed and headers is not None:
            failed = with_headers(failed, topics, values, keys, headers)
        return local_failures + failed
