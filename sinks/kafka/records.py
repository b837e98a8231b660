"""From events to Kafka records, for the kafka sink: each record's topic, key and
headers (its value is the sink's `format`, agent/delivery.py).

- topic and key are templates (templates.py); a constant topic is one string
  for the whole batch, and no key is None, so the sink keeps its lean produce call.
- timestamp: the event's `time` (the line's own time, when a parser read it), else
  the time of the batch; one int for the whole batch when no event has a time of
  its own, so that the sink keeps its lean produce call.
- headers: of the event headers named by the sink's `headers` option, those an
  event has become its record headers, values UTF-8. Events that share a headers
  dict (a source's run of lines) share one list of (name, bytes) pairs, so a value
  is encoded once per run, not once per event; a batch in which no event has any
  of them has no headers at all (None), and again takes the lean call.
- an event whose topic or key names a missing field, or whose topic comes out as
  no valid topic name, is left out and returned as a dead letter with the reason.
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple, cast

from agent.api import Event
from sinks.kafka.templates import Template, TemplateError, parse

# Kafka's rule for topic names (its Topic.validate): these characters, 1-249 of them
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
MAX_TOPICS_SEEN = 10_000  # rendered topic names remembered as valid (then forgotten)

Headers = list[tuple[str, bytes]]


class DeadLetter(NamedTuple):
    reason: str  # the x-error header: "MISSING_FIELD: host"
    topic: str  # where the record was meant to go (the template when it did not render)
    value: bytes
    key: bytes | None
    headers: Headers | None


class Records(NamedTuple):
    """Parallel lists, but `topic` is one string and `timestamps` one int when every
    record has the same, and `keys` / `headers` are None when no record has one."""

    topic: str | list[str]
    values: list[bytes]
    keys: list[bytes | None] | None
    headers: list[Headers | None] | None
    timestamps: int | list[int]  # epoch ms
    dead: list[DeadLetter]


class RecordMaker:
    """Owned by one sink; used from its event loop only."""

    def __init__(self, topic: Template, key: Template | None, header_names: list[str]):
        self.topic, self.key, self.header_names = topic, key, tuple(header_names)
        self._valid_topics: set[str] = set()

    def make(self, events: list[Event], values: list[bytes]) -> Records:
        headers = self.headers_of(events)
        stamps = timestamps(events, int(time.time() * 1000))
        topic: str | list[str | None] | None = self.topic.constant
        if topic is None:
            topic = self._topics(events)
        keys = None
        if self.key is not None:
            rendered = self.key.render_all(events)
            keys = [k if k is None else k.encode() for k in rendered]
        bad = self._bad(events, topic, keys)
        if not bad:  # so no topic is None
            return Records(cast("str | list[str]", topic), values, keys, headers, stamps, [])
        dead = []
        for i in bad:
            where = topic if isinstance(topic, str) else topic[i] or self.topic.text
            key = keys[i] if keys is not None else None
            hdrs = headers[i] if headers is not None else None
            dead.append(DeadLetter(self._reason(events[i]), where, values[i], key, hdrs))
        keep = [i for i in range(len(events)) if i not in bad]

        def pick(items):
            if items is None or isinstance(items, (str, int)):
                return items
            return [items[i] for i in keep]

        return Records(pick(topic), pick(values), pick(keys), pick(headers), pick(stamps), dead)

    def headers_of(self, events: list[Event]) -> list[Headers | None] | None:
        names = self.header_names
        if not names or not self._any_wanted(events):
            return None
        out: list[Headers | None] = []
        shared, pairs = None, None
        for e in events:
            if e.headers is not shared:
                shared = e.headers
                pairs = [(n, shared[n].encode()) for n in names if n in shared] or None
            out.append(pairs)
        return out

    def _any_wanted(self, events: list[Event]) -> bool:
        """Whether an event has a header to send: a scan that stops at the first,
        and costs ~20 ns an event when there is none (a sink left at the default
        `[host]` whose sources do not add one)."""
        names, shared = self.header_names, None
        for e in events:
            if e.headers is not shared:
                shared = e.headers
                for name in names:
                    if name in shared:
                        return True
        return False

    def _topics(self, events: list[Event]) -> list[str | None]:
        """Rendered topics; an invalid name becomes None (a dead letter)."""
        valid = self._valid_topics
        out = self.topic.render_all(events)
        for i, t in enumerate(out):
            if t is not None and t not in valid:
                if not TOPIC_NAME.fullmatch(t) or t in (".", ".."):
                    out[i] = None
                    continue
                if len(valid) >= MAX_TOPICS_SEEN:
                    valid.clear()
                valid.add(t)
        return out

    @staticmethod
    def _bad(events, topic, keys) -> set[int]:
        bad: set[int] = set()
        if not isinstance(topic, str):
            bad.update(i for i, t in enumerate(topic) if t is None)
        if keys is not None:
            bad.update(i for i, k in enumerate(keys) if k is None)
        return bad

    def _reason(self, event: Event) -> str:
        for name, template in (("topic", self.topic), ("key", self.key)):
            if template is not None and (field := template.missing(event)) is not None:
                return f"MISSING_FIELD: {field} ({name} {template.text})"
        return f"INVALID_TOPIC: {self.topic.render(event)!r} is not a valid topic name"


def timestamps(events: list[Event], now_ms: int) -> int | list[int]:
    """The records' timestamps: `now_ms` for all when no event has a time of its own."""
    times = [e.time for e in events]
    if times.count(None) == len(times):
        return now_ms
    return [now_ms if t is None else t for t in times]


def with_headers(failed: list[tuple], topics, values, keys, headers) -> list[tuple]:
    """`failed` with each record's headers, found among the records produced by its
    topic, value and key: librdkafka's delivery reports do not carry headers. Of
    records identical in all three, any one's headers may be taken."""
    produced: dict[tuple, list] = {}
    for record in zip(topics, values, keys, headers, strict=True):
        produced.setdefault(record[:3], []).append(record[3])
    return [(err, t, v, k, produced[(t, v, k)].pop(), ts) for err, t, v, k, _, ts in failed]


def config_problems(topic: str, key: str | None, dead_letter_topic: str | None) -> list[str]:
    """`validate` findings about the sink's templates, as "key: problem"."""
    problems = []
    parsed = {}
    for name, text in (("topic", topic), ("key", key)):
        if text is not None:
            try:
                parsed[name] = parse(text)
            except TemplateError as exc:
                problems.append(f"{name}: {exc}")
    if "topic" in parsed:
        literal = "".join(parsed["topic"].literals)
        wrong = sorted(set(re.sub(r"[A-Za-z0-9._-]", "", literal)))
        if wrong:
            problems.append(
                f"topic: {''.join(wrong)!r} cannot be in a topic name (letters, digits, . _ -)"
            )
        if parsed["topic"].constant is None and dead_letter_topic is None:
            problems.append(
                "topic: a template needs dead_letter_topic (a plain topic name, for the "
                "records whose topic cannot be made)"
            )
    if dead_letter_topic is not None and not TOPIC_NAME.fullmatch(dead_letter_topic):
        problems.append(
            f"dead_letter_topic: {dead_letter_topic!r} is not a topic name "
            "(letters, digits, . _ -; no placeholders)"
        )
    return problems
