"""The positions topic of the exactly-once kafka sink: what the broker holds of a
pipeline's progress, written in the same transactions as its records
(exactly_once.py), read back at every start.

Keys are JSON arrays `[transactional id, "channel"]` (the durable channel's end
sequence number, valid under the channel's identity) and `[transactional id,
"mark", source, key]` (a source's position, `Ack.mark`); the topic is compacted, so
the last value of each key is what counts.
"""

from __future__ import annotations

import time

import orjson

from agent.api import Channel, Event, TakeBatch
from common.kafka_admin import READ_TIMEOUT_S, ensure_topic

POSITIONS_PARTITIONS = 1


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

    def load(self, key: bytes | None, value: bytes | None) -> None:
        """One record of the positions topic (records of other ids are ignored)."""
        if key is None:
            return
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
                err = msg.error()
                if err is not None:
                    if err.code() not in ignored:
                        raise KafkaException(err)
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
    ensure_topic(admin_conf, topic, POSITIONS_PARTITIONS, {"cleanup.policy": "compact"}, log)


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
