"""The contract between the agent's sources, interceptors, channels and sinks.

Theory of operation (Flume's model, plus end-to-end acknowledgement):

- A *source* produces `Event`s and hands batches to `emit`, which the runtime
  builds for it: it runs the source's interceptors (parsers, filters, field
  adders), then the channel selector (fan-out or multiplexing), then puts the batch
  into each selected channel inside one put transaction.
- A *channel* holds events between a source and a sink and is bounded: `put`
  waits while it is full (backpressure), `offer` refuses instead (for UDP, which
  cannot push back, and counts the drop).
- A *sink* takes batches from one channel inside a take transaction, delivers them
  to the next hop, then commits (on acknowledgement) or rolls back (on failure, so
  the events are taken again later).
- Every event may carry an `Ack`. When a copy of the event is safely delivered
  (the sink's next hop acknowledged it, or a durable channel committed it), the
  holder calls `ack.settle()`. The `Ack` fires its callback once all copies are
  settled. The tail source advances its file positions only from these callbacks,
  so a position never runs ahead of what the broker acknowledged.

Components are plugins: one module per type, a typed `Config` dataclass next to the
code, registered with `@register(kind, type_name)`. The pipeline compiler
(`agent/config.py`) validates YAML against `Config` before anything starts.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

if TYPE_CHECKING:
    from agent.source_audit import SourceTally

KINDS = ("source", "interceptor", "channel", "sink")


class Size(int):
    """A byte count. In YAML: an int, or a string such as "64MiB", "512k", "1.5GB"
    (k/M/G = 1000s, KiB/MiB/GiB = 1024s). Annotate a Config field with it."""


class Duration(float):
    """Seconds. In YAML: a number of seconds, or a string such as "5s", "250ms", "2m",
    "1h". Annotate a Config field with it."""


class Ack:
    """Counts outstanding copies of one delivery unit; fires `callback` once at zero.

    Owned by the source that created it; settled from channel/sink tasks. All
    agent components run on one asyncio loop, so no lock is needed.
    """

    __slots__ = ("_pending", "_callback", "mark")

    def __init__(self, callback: Callable[[], None], copies: int = 1, mark: tuple | None = None):
        self._pending = copies
        self._callback = callback
        # (source name, key, value): the source's position after this unit's events,
        # JSON-able. A durable channel stores it with them and hands it back at a
        # restart (`Source.resume_from`), so the source does not read them again.
        self.mark = mark

    def add_copies(self, n: int) -> None:
        """Called by the selector when an event fans out to `n` extra channels."""
        self._pending += n

    def settle(self, n: int = 1) -> None:
        """Settle `n` copies at once (default one)."""
        self._pending -= n
        if self._pending == 0:
            self._callback()


@dataclasses.dataclass(slots=True)
class Event:
    """One log line (or record) travelling through the agent.

    body:    the raw bytes, without the trailing newline.
    headers: small string metadata (source name, file path, host, `parse_error`...),
             used by the multiplexing selector and by sinks (e.g. as record key).
             SHARED: a source gives the events of a batch (often of many batches)
             one and the same dict, so never change it in place: replace it
             (`set_header`, or `e.headers = {**e.headers, ...}`). That saves a
             dict copy per line, most of the tail's per-line cost.
    record:  the parsed form when a parser ran (JSON-serialisable dict); sinks that
             write JSON serialise it instead of `body`. Unparsable lines keep
             `record=None`, get header `parse_error`, and travel on: never dropped.
    ack:     see `Ack`; None for sources that need no acknowledgement.
    time:    the line's own time in epoch milliseconds, set by a parser that read it
             (nginx `$time_local`, syslog); None otherwise. The kafka sink makes it
             the record's timestamp (the time it took the line when None), the
             clock the audit buckets by (common/audit.py).
    """

    body: bytes
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    record: dict[str, Any] | None = None
    ack: Ack | None = None
    time: int | None = None

    def settle(self) -> None:
        if self.ack is not None:
            self.ack.settle()

    def set_header(self, key: str, value: str) -> None:
        """Set one header on this event only (copy on write: see `headers`)."""
        self.headers = {**self.headers, key: value}


def settle_all(events: list[Event]) -> None:
    """Settle every event of a batch, one call per run of events sharing an Ack."""
    ack, run = None, 0
    for e in events:
        if e.ack is not ack:
            if ack is not None:
                ack.settle(run)
            ack, run = e.ack, 0
        run += 1
    if ack is not None:
        ack.settle(run)


class Counter(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class Gauge(Protocol):
    def set(self, value: float) -> None: ...


class Histogram(Protocol):
    def observe(self, value: float) -> None: ...


class Metrics(Protocol):
    """Prometheus-style registry handed to every component (agent/metrics.py).

    Names follow Prometheus conventions (`logflume_agent_events_in_total`; a
    counter's name ends in `_total`); labels identify the component
    (`component="tail-nginx"`). Asking again for the same name and labels returns
    the same series. Series may be asked for and updated from any thread (a
    client library's callback thread, a worker thread saving state).
    """

    def counter(self, name: str, help: str, **labels: str) -> Counter: ...

    def gauge(self, name: str, help: str, **labels: str) -> Gauge: ...

    def histogram(self, name: str, help: str, **labels: str) -> Histogram: ...


@dataclasses.dataclass
class Context:
    """What the runtime gives each component when it is built."""

    agent: str  # the agent's name in pipelines.yaml
    name: str  # the component's name
    metrics: Metrics
    state_dir: str  # a directory this component may keep state in (positions, WAL)
    log: logging.Logger
    # a sink that publishes the audit: the tallies of the sources it publishes for
    # (agent/source_audit.py); the runtime fills it for sinks that `publishes_audit`
    audited_sources: list[SourceTally] = dataclasses.field(default_factory=list)


Emit = Callable[[list["Event"]], Awaitable[None]]


class Component(abc.ABC):
    """Base of every plugin. `Config` is a dataclass; `validate` adds cross-field checks."""

    Config: ClassVar[type]
    kind: ClassVar[str]
    type_name: ClassVar[str]

    def __init__(self, config: Any, context: Context):
        self.config = config
        self.context = context

    @classmethod
    def validate(cls, config: Any) -> list[str]:
        """Errors beyond types and names (empty list = fine). Messages name the key."""
        return []

    @classmethod
    def listen_ports(cls, config: Any) -> list[tuple[str, int]]:
        """(protocol, port) pairs this component binds, for clash detection."""
        return []


class Source(Component):
    """Readiness: a source that accepts input from outside (a socket) sets
    `signals_ready = True` and calls `self.ready()` once it can accept it (right
    after binding). Until then the runtime reports it "starting" and `/health`
    answers 503, so a client that waits for health loses nothing sent before the
    bind. Other sources count as ready as soon as their task starts."""

    signals_ready: ClassVar[bool] = False

    def __init__(self, config: Any, context: Context):
        super().__init__(config, context)
        self.on_ready: Callable[[], None] | None = None  # set by the runtime

    def ready(self) -> None:
        """Tell the runtime the source accepts input now (idempotent)."""
        if self.on_ready is not None:
            self.on_ready()

    @abc.abstractmethod
    async def run(self, emit: Emit, offer: Callable[[list[Event]], bool]) -> None:
        """Produce events until cancelled. `await emit(batch)` waits for channel room;
        `offer(batch)` returns False instead of waiting (the source counts the drop).
        On cancellation, stop reading, persist state, and re-raise CancelledError."""

    def resume_from(self, held: list[dict[str, Any]]) -> None:
        """Called by the runtime before `run` when every channel of the source is
        durable: per channel, the last mark value (see `Ack.mark`) of each of the
        source's keys among the events it holds or delivered. The source need not
        produce again what all of them hold. Optional; the default ignores it."""

    def flush_state(self) -> None:
        """Called by the runtime after `run` was cancelled AND the channels drained
        (shutdown or reload): persist positions that acknowledgements arriving during
        the drain advanced. Optional; the default does nothing."""


class Interceptor(Component):
    @abc.abstractmethod
    def intercept(self, events: list[Event]) -> list[Event]:
        """Pure, synchronous transformation of a batch (parse, filter, add fields).
        An event removed by a filter must be settled by the interceptor. Headers
        are shared between events: replace an event's dict, never update it."""


class TransactionError(RuntimeError):
    """A take transaction used out of order: ended a second time (commit or rollback
    after a commit or rollback), or used after its channel was closed. Always a bug in
    the sink; raised instead of ignored, as Flume's BasicTransactionSemantics does."""


class TakeBatch(abc.ABC):
    """A take transaction: the sink delivers `events`, then ends the transaction
    exactly once, with `commit` or `rollback`, while the channel is open. Any other
    use raises TransactionError and changes nothing. A channel type subclasses this
    and implements `_commit` and `_rollback`, which run at most once, in all."""

    __slots__ = ("channel", "events", "_ended")

    def __init__(self, channel: Channel, events: list[Event]):
        self.channel = channel
        self.events = events
        self._ended: str | None = None  # "committed" or "rolled back"

    async def commit(self) -> None:
        """The next hop acknowledged: remove the events for good and settle them."""
        self._end("commit", "committed")
        await self._commit()

    async def rollback(self) -> None:
        """Delivery failed: the events return to the head of the channel."""
        self._end("roll back", "rolled back")
        await self._rollback()

    def _end(self, action: str, outcome: str) -> None:
        # Marked ended before the work runs: a commit that failed half way is not
        # rolled back over (that would return events already released or settled).
        if self._ended is not None or self.channel.closed:  # the message only on misuse
            what = f"{action} a take of {len(self.events)} events"
            if self._ended is not None:
                name = self.channel.context.name
                raise TransactionError(
                    f"cannot {what} from channel {name!r}: it was already {self._ended}"
                )
            self.channel.check_open(what)
        self._ended = outcome

    @property
    def end_seq(self) -> int | None:
        """The sequence number after this take's last event, for channels that number
        their events (under `Channel.identity`): a sink that records it with what it
        delivered can later tell the channel what it need not replay
        (`Channel.discard_below`). None for channels that do not, and for an empty
        take."""
        return None

    @abc.abstractmethod
    async def _commit(self) -> None:
        """Remove the events for good (see `commit`)."""

    @abc.abstractmethod
    async def _rollback(self) -> None:
        """Return the events to the head of the channel (see `rollback`)."""


class Channel(Component):
    closed: bool = False  # set by close(); a closed channel opens and ends no take

    def check_open(self, action: str) -> None:
        """TransactionError naming `action` when the channel is closed."""
        if self.closed:
            raise TransactionError(f"cannot {action}: channel {self.context.name!r} is closed")

    @abc.abstractmethod
    async def put(self, events: list[Event]) -> None:
        """Put transaction: all or nothing; waits while the channel is full."""

    @abc.abstractmethod
    def offer(self, events: list[Event]) -> bool:
        """Non-blocking put: False (and nothing stored) when there is no room."""

    # Set by the runtime before anything starts when a sink reading this channel
    # records its sources' positions with what it delivers (an exactly-once sink):
    # that sink resolves it with {source: {key: mark}} of what the next hop holds, and
    # sources whose channels keep nothing resume from it instead of their own files.
    delivered_marks: asyncio.Future | None = None

    @abc.abstractmethod
    async def take(self, max_events: int, max_wait: float, whole_puts: bool = False) -> TakeBatch:
        """Open a take transaction of up to `max_events`, waiting up to `max_wait`
        seconds for the first one (an empty batch when none came). With
        `whole_puts` a put is never split: the batch holds at least one whole put
        (more than `max_events` when that put is larger), then whole puts while they
        fit; a sink that records source positions with its deliveries needs this,
        since a position (`Ack.mark`) stands for a whole put."""

    @property
    def identity(self) -> str | None:
        """The name the channel's sequence numbers are valid under: made with a durable
        channel's storage (a channel whose directory was wiped numbers again from 0
        under a new identity), with a memory channel (valid in its process only).
        None for channels that do not number their events."""
        return None

    def discard_below(self, seq: int) -> int:
        """Drop the stored events below sequence number `seq` (see
        `TakeBatch.end_seq`; only ever with a `seq` recorded under this channel's
        `identity`) as if a sink had committed them, because the next hop already
        holds them. Called before a sink's first take; returns how many events were
        dropped. Channels that do not number their events have nothing to drop."""
        return 0

    async def close(self) -> None:
        """Flush state to disk where the channel is durable; set `closed` (an
        override does too)."""
        self.closed = True

    def pending(self) -> int:
        """Events stored and not yet committed by a sink (taken ones included); the
        runtime waits for 0 when it drains the channel at shutdown."""
        return 0

    def held_marks(self, source: str) -> dict[str, Any] | None:
        """A durable channel: the last mark (`Ack.mark`) per key of `source` among
        the events it holds durably or delivered. None: the channel keeps nothing
        across a crash (the default), so the source must produce it all again."""
        return None


class Sink(Component):
    @classmethod
    def records_positions(cls, config: Any) -> bool:
        """True when this sink stores its sources' positions with what it delivers and
        resolves `Channel.delivered_marks` (the runtime then makes sources wait for
        it). Default False."""
        return False

    @classmethod
    def publishes_audit(cls, config: Any) -> bool:
        """True when this sink publishes the audit (common/audit.py): then it also
        publishes the source tier of the sources whose lines it is the first such
        sink to read (`Context.audited_sources`). Default False."""
        return False

    @abc.abstractmethod
    async def run(self, channel: Channel) -> None:
        """Take, deliver, commit/rollback until cancelled; on cancellation, finish or
        roll back what is in flight within the grace period and re-raise."""


REGISTRY: dict[tuple[str, str], type[Component]] = {}
C = TypeVar("C", bound=type[Component])


class DuplicateType(ValueError):
    """A class registered under a (kind, type name) another class already has. Never
    replaced: the first stays (agent/plugins.py loads the built-in types first, so a
    plugin never displaces one), and the decorator registers none of the second
    class's names."""

    def __init__(self, kind: str, name: str, existing: type, new: type):
        self.kind, self.name, self.existing, self.new = kind, name, existing, new
        super().__init__(
            f"{kind} type {name!r} registered twice: by {qualified_name(existing)} "
            f"and by {qualified_name(new)}"
        )


def qualified_name(cls: type) -> str:
    """`package.module.Class`: how errors about registered types name a class."""
    return f"{cls.__module__}.{cls.__qualname__}"


def register(kind: str, type_name: str, aliases: tuple[str, ...] = ()) -> Callable[[C], C]:
    """Class decorator: `@register("source", "tail")`. The class needs a `Config` dataclass.
    `aliases`: other names the same type answers to in pipelines.yaml (a type renamed
    for users keeps its old name working). A name already registered raises
    DuplicateType, and then none of the class's names is registered."""
    if kind not in KINDS:
        raise ValueError(f"unknown component kind {kind!r}")

    def deco(cls: C) -> C:
        if not dataclasses.is_dataclass(getattr(cls, "Config", None)):
            raise TypeError(f"{cls.__name__} needs a dataclass named Config")
        names = (type_name, *aliases)
        for name in names:
            if (kind, name) in REGISTRY:
                raise DuplicateType(kind, name, REGISTRY[(kind, name)], cls)
        if len(set(names)) < len(names):
            raise ValueError(f"{kind} type {type_name!r}: a name is given twice in {names}")
        for name in names:
            REGISTRY[(kind, name)] = cls
        cls.kind, cls.type_name = kind, type_name
        return cls

    return deco
