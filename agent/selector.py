"""Channel selectors: which of a source's channels each event goes to.

- replicating (default): every event goes to every channel of the source.
- multiplexing: the value of one header (`header:`) or parsed-record field
  (`field:`) picks the channels from `mapping`, else `default`; an event that maps
  to no channel is dropped (settled and counted).

When an event goes to k channels its Ack gains k-1 copies, so the source hears
about it only once every copy is safely delivered. The same Event object is shared
by the channels: nothing downstream of the selector mutates events.
"""

from __future__ import annotations

from agent.api import Channel, Event


class Selector:
    """Built per source by the runtime; stateless apart from its tables."""

    def __init__(self, channels: list[tuple[str, Channel]], config):
        self.channels = channels
        self.by_name = dict(channels)
        self.config = config
        self.multiplexing = config.type == "multiplexing"
        self.mapping = {
            value: [(n, self.by_name[n]) for n in names] for value, names in config.mapping.items()
        }
        self.default = [(n, self.by_name[n]) for n in config.default]

    def route(self, events: list[Event]) -> tuple[list[tuple[Channel, list[Event]]], int]:
        """[(channel, events)] to put, and how many events mapped to no channel."""
        if not self.multiplexing:
            extra = len(self.channels) - 1
            if extra:
                for e in events:
                    if e.ack is not None:
                        e.ack.add_copies(extra)
            return [(ch, events) for _, ch in self.channels], 0
        groups: dict[str, list[Event]] = {}
        header, field = self.config.header, self.config.field
        dropped = 0
        for e in events:
            if header is not None:
                key = e.headers.get(header)
            else:
                key = e.record.get(field) if e.record is not None else None
            targets = self.mapping.get(str(key), self.default) if key is not None else self.default
            if not targets:
                dropped += 1
                e.settle()
                continue
            if len(targets) > 1 and e.ack is not None:
                e.ack.add_copies(len(targets) - 1)
            for name, _ in targets:
                groups.setdefault(name, []).append(e)
        return [(self.by_name[name], evs) for name, evs in groups.items()], dropped
