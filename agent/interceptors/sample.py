"""`sample` interceptor: keeps 1 event in `rate`, by count or, with `key`, by the
hash of a field's value (all events of one value kept or dropped together); the
others are dropped and counted.

Without `key`, every `rate`-th event of the source is kept (the first, then the
`rate + 1`-th, ...), across batches. With `key`, the decision belongs to the key's
value, as Vector's sample `key_field`: an event is kept when the XXH64 (seed 0) of
the value's UTF-8 text is a multiple of `rate`, so all events of one value (a
client, a session) are kept or dropped together, on every host and after restarts,
and about 1 value in `rate` is kept. The value is the parsed record's top-level
field `key` when the record has it and it is not null (a number or boolean as JSON
writes it), else the event's header `key`; events with neither are sampled by
counting.

Dropped events are settled, so their acknowledgement still completes (a tail's
position moves past them), and counted in `logflume_agent_sampled_out_total`; the
runtime counts them as filtered, in `logflume_agent_source_events_filtered_total`
and the audit's source tier.
"""

from __future__ import annotations

import dataclasses

import orjson
import xxhash

from agent.api import Context, Event, Interceptor, register, settle_all


@dataclasses.dataclass
class SampleConfig:
    rate: int  # keep 1 event in `rate` (1: all)
    key: str | None = None  # sample by this record field's (or header's) value; null: by count


@register("interceptor", "sample")
class Sample(Interceptor):
    """Drops all but 1 event in `rate`; owned by one source's pipeline (single task)."""

    Config = SampleConfig

    @classmethod
    def validate(cls, config: SampleConfig) -> list[str]:
        errors = [] if config.rate >= 1 else ["rate: must be at least 1"]
        return errors + (["key: empty"] if config.key == "" else [])

    def __init__(self, config: SampleConfig, context: Context):
        super().__init__(config, context)
        self._seen = 0  # events sampled by counting so far
        self._sampled = context.metrics.counter(
            "logflume_agent_sampled_out_total",
            "Events dropped by sample",
            component=context.name,
        )

    def _counted(self) -> bool:
        keep = self._seen % self.config.rate == 0
        self._seen += 1
        return keep

    def intercept(self, events: list[Event]) -> list[Event]:
        rate, key = self.config.rate, self.config.key
        if rate == 1 or not events:
            return events
        if key is None:
            first = -self._seen % rate
            self._seen += len(events)
            kept = events[first::rate]
            dropped = [e for i, e in enumerate(events) if (i - first) % rate]
        else:
            hash64, kept, dropped = xxhash.xxh64_intdigest, [], []
            for e in events:
                value = e.record.get(key) if e.record is not None else None
                if value is None:
                    value = e.headers.get(key)
                if value is None:
                    keep = self._counted()
                else:
                    text = value if isinstance(value, str) else orjson.dumps(value).decode()
                    keep = hash64(text.encode()) % rate == 0
                (kept if keep else dropped).append(e)
        if dropped:
            settle_all(dropped)
            self._sampled.inc(len(dropped))
        return kept
