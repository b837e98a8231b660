"""Exactly-once delivery for the kafka sink (`delivery: exactly_once`).

Theory of operation. Every take batch becomes one Kafka transaction (KIP-98) that
holds the batch's records AND the position the pipeline reached with them, written
to a compacted positions topic (`positions_topic`, keyed by the transactional id).
Either both are committed or neither is, so the broker always knows exactly which
lines it holds; the agent's own position files and channel checkpoints may lag it,
never lead it. At every start the sink:

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
import time

import orjson

from agent.api import Channel, Event, TakeBatch
from agent.delivery import encode_all
from common.backoff import Backoff
from sinks._kafka_records import Records

POSITIONS_PARTITIONS = 1
READ_TIMEOUT_S = 30.0  # most time to read the positions topic at start
INIT_TIMEOUT_S = 30.0  # per init_transactions attempt
COMMIT_TIMEOUT_S = 60.0  # per commit_transaction attempt


def position_key(transactional_id: str, kind: str, *parts: str) -> bytes:
    """Keys of the positions topic: a JSON array, so names may hold any character."""
    return orjson.dumps([transactional_id, kind, *parts])


class CommittedPositions:
    """What the broker holds for one transactional id: the durable channel's end
    sequence number and the sources' marks. Filled from the positions topic at
    start, then kept current with each committed transaction. Owned by one sink."""

    def __init__(self, transactional_id: str, channel_identity: str | None = None):
        self.transactional_id = transactional_id
        self.channel_identity = channel_identity
        self.end_seq: int | None = None  # of the channel of `channel_identity`
        self.marks: dict[str, dict[str, object]] = {}  # source -> key -> mark value

    def load(self, key: bytes, value: bytes | None) -> None:
        """One record of the positions topic (records of other ids are ignored)."""
        try:
            parts = orjson.loads(key)
        except orjson.JSONDecodeError:
            return
        if not isinstance(parts, list) or not parts or parts[0] != self.transactional_id:
            return
        if value is None:
            return
        if parts[1:] == ["channel"]:
            doc = orjson.loads(value)
            if doc.get("identity") == self.channel_identity:
                self.end_seq = int(doc["end_seq"])
        elif len(parts) == 4 and parts[1] == "mark":
            self.marks.setdefault(parts[2], {})[parts[3]] = orjson.loads(value)

    def records_for(self, take: TakeBatch) -> list[tuple[bytes, bytes]]:
        """The position records to write with `take`'s events, and the positions
        they will be once committed (`apply`)."""
        out = []
        tid = self.transactional_id
        if take.end_seq is not None:
            doc = {"identity": self.channel_identity, "end_seq": take.end_seq}
            out.append((position_key(tid, "channel"), orjson.dumps(doc)))
        for (source, key), value in last_marks(take.events).items():
            out.append((position_key(tid, "mark", source, key), orjson.dumps(value)))
        return out

    def apply(self, records: list[tuple[bytes, bytes]]) -> None:
        for key, value in records:
            self.load(key, value)


def last_marks(events: list[Event]) -> dict[tuple[str, str], object]:
    """The last mark per (source, key) among the events' Acks (one look per run of
    events sharing an Ack)."""
    out: dict[tuple[str, str], object] = {}
    ack = None
    for e in events:
        if e.ack is not ack:
            ack = e.ack
            if ack is not None and ack.mark is not None:
                source, key, value = ack.mark
                out[(source, key)] = value
    return out


def read_positions(consumer_conf: dict, topic: str, positions: CommittedPositions, log) -> None:
    """Read every committed record of `topic` into `positions` (blocking: run it in
    a thread). A missing topic reads as empty.

    The consumer is assigned its partitions and never joins or commits to its group,
    but librdkafka wants a group.id and looks the group's coordinator up anyway: an
    agent's user without ACLs on that group (it needs none) gets
    GROUP_AUTHORIZATION_FAILED from that lookup, which is no reason to stop reading."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    ignored = (KafkaError._PARTITION_EOF, KafkaError.GROUP_AUTHORIZATION_FAILED)
    consumer = Consumer(
        {
            **consumer_conf,
            "group.id": f"{positions.transactional_id}-positions",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return
        ends = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=READ_TIMEOUT_S
            )
            if high > low:
                ends[p] = high
        if not ends:
            return
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while ends:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} took more than {READ_TIMEOUT_S:.0f}s")
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is not None:
                    if msg.error().code() not in ignored:
                        raise KafkaException(msg.error())
                    continue
                positions.load(msg.key(), msg.value())
            for tp in consumer.position([TopicPartition(topic, p) for p in list(ends)]):
                if tp.offset >= ends[tp.partition]:
                    del ends[tp.partition]
    finally:
        consumer.close()
    log.info(
        "committed positions of %s: channel end %s, %d marks",
        positions.transactional_id,
        positions.end_seq,
        sum(len(m) for m in positions.marks.values()),
    )


def ensure_positions_topic(admin_conf: dict, topic: str, log) -> None:
    """Create the compacted positions topic unless it exists (blocking)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(admin_conf)
    if topic in admin.list_topics(timeout=READ_TIMEOUT_S).topics:
        return
    brokers = len(admin.list_topics(timeout=READ_TIMEOUT_S).brokers)
    new = NewTopic(
        topic,
        num_partitions=POSITIONS_PARTITIONS,
        replication_factor=min(3, max(1, brokers)),
        config={"cleanup.policy": "compact"},
    )
    try:
        admin.create_topics([new], request_timeout=READ_TIMEOUT_S)[topic].result(READ_TIMEOUT_S)
        log.info("created the positions topic %s", topic)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


async def resolve_sources(channel: Channel, positions: CommittedPositions, log) -> None:
    """Step 3 of the start: sources learn their positions, the channel drops what
    the broker holds."""
    future = channel.delivered_marks
    if future is not None and not future.done():
        future.set_result(positions.marks)
    if positions.end_seq is not None:
        dropped = channel.discard_below(positions.end_seq)
        if dropped:
            log.info("dropped %d events the broker already holds from the channel", dropped)


async def run_transactions(sink, channel: Channel) -> None:
    """The exactly-once take loop of `sink` (a KafkaSink whose producer is
    transactional): start as the module docstring says, then one transaction per
    take until cancelled."""
    cfg, log, producer = sink.config, sink.context.log, sink.producer
    conf = sink.client_config()
    positions = CommittedPositions(sink.transactional_id, channel.identity)
    await asyncio.to_thread(ensure_positions_topic, conf, cfg.positions_topic, log)
    await asyncio.to_thread(producer.init_transactions, INIT_TIMEOUT_S)
    await asyncio.to_thread(read_positions, conf, cfg.positions_topic, positions, log)
    await resolve_sources(channel, positions, log)
    interval = float(cfg.commit_interval)
    while True:
        take = await channel.take(cfg.batch_events, 0.5, whole_puts=True)
        began = time.monotonic()
        if take.events:
            try:
                records = positions.records_for(take)
                await _deliver(sink, take.events, records)
            except BaseException:
                sink.counters.rollbacks.inc()
                await asyncio.shield(_abort_and_roll_back(producer, take))
                raise
            positions.apply(records)
        await take.commit()
        sink.counters.out.inc(len(take.events))
        if take.events and len(take.events) < cfg.batch_events:
            # the channel keeps what arrives meanwhile for the next transaction
            await asyncio.sleep(began + interval - time.monotonic())


async def _abort_and_roll_back(producer, take: TakeBatch) -> None:
    from confluent_kafka import KafkaException

    try:
        await asyncio.to_thread(producer.abort_transaction, 5)
    except KafkaException:
        pass  # no transaction open, or the producer is fenced: the broker aborts it
    await take.rollback()


async def _deliver(sink, events: list[Event], records: list[tuple[bytes, bytes]]) -> None:
    """Commit one transaction holding `events` and the position `records`; retry
    aborted attempts, dead-lettering the records the broker refused for good."""
    from confluent_kafka import KafkaException

    cfg, producer = sink.config, sink.producer
    out = sink.records.make(events, encode_all(cfg.format, events))
    values = out.values
    # records whose template names a missing field: to the dead-letter topic, each try
    dead = [sink.dead_letter(*d, log=False) for d in out.dead]
    if dead:
        sink.context.log.warning(
            "%d records to %s: %s", len(dead), sink.dlq_topic, out.dead[0].reason
        )
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
        while i < len(values):
            i = _produce_from(sink, out, i, rejected, on_delivery)
            if i < len(values):  # librdkafka's queue is full: let the poll thread drain it
                await asyncio.sleep(0.005)
        for topic, value, key, headers in dead:
            await _produce(producer, topic, value, key, headers, on_delivery)
        for key, value in records:
            await _produce(producer, cfg.positions_topic, value, key, None, on_delivery)
        try:
            await _commit(sink)
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                raise
            await asyncio.to_thread(producer.abort_transaction, COMMIT_TIMEOUT_S)
        else:
            sink.ack_latency.observe(time.monotonic() - started)
            return
        for error, value in failed:
            if is_permanent(error) and value not in rejected:
                rejected[value] = error
        sink.retried.inc(len(values) - len(rejected))
        delay = backoff.next()
        sink.context.log.warning(
            "transaction of %d records aborted (%s); retrying in %.1fs", len(values), err, delay
        )
        await asyncio.sleep(delay)


async def _commit(sink) -> None:
    """commit_transaction, called again while it fails with a retriable error (a
    timeout: the commit may be under way, and aborting then could not undo it)."""
    from confluent_kafka import KafkaException

    while True:
        try:
            await asyncio.to_thread(sink.producer.commit_transaction, COMMIT_TIMEOUT_S)
            return
        except KafkaException as exc:
            err = exc.args[0]
            if not err.retriable() or err.txn_requires_abort():
                raise
            sink.context.log.warning("commit of a transaction: %s; trying again", err)


def is_permanent(err) -> bool:
    from sinks.kafka import PERMANENT

    return err.name() in PERMANENT


def _produce_from(sink, out: Records, i: int, rejected: dict, on_delivery) -> int:
    """Produce `out.values[i:]` (refused ones to the dead-letter topic) until
    librdkafka's queue is full; return the index of the first value not produced."""
    from confluent_kafka import KafkaException

    from sinks.kafka import PARTITION_ANY

    produce, values, n = sink.producer.produce, out.values, len(out.values)
    topics, keys, headers = out.topic, out.keys, out.headers
    while i < n:
        value = values[i]
        topic = topics if isinstance(topics, str) else topics[i]
        key = keys[i] if keys is not None else None
        hdrs = headers[i] if headers is not None else None
        refusal = rejected.get(value) if rejected else None
        try:
            if refusal is None and hdrs is None:
                produce(topic, value, key, PARTITION_ANY, on_delivery)
            elif refusal is None:  # (..., on_delivery, its alias, timestamp 0: now, headers)
                produce(topic, value, key, PARTITION_ANY, on_delivery, None, 0, hdrs)
            else:
                dlq, dead, key, hdrs = sink.dead_letter(refusal.name(), topic, value, key, hdrs)
                produce(dlq, dead, key, PARTITION_ANY, on_delivery, None, 0, hdrs)
        except BufferError:
            return i
        except KafkaException as exc:  # refused by librdkafka itself (too large)
            if refusal is not None or not is_permanent(exc.args[0]):
                raise
            rejected[value] = exc.args[0]
            continue  # this value again, to the dead-letter topic
        i += 1
    return n


async def _produce(producer, topic, value, key, headers, on_delivery) -> None:
    """One produce, waiting while librdkafka's queue is full."""
    while True:
        try:
            producer.produce(topic, value, key, headers=headers, on_delivery=on_delivery)
            return
        except BufferError:
            await asyncio.sleep(0.005)
