"""Telling "ZooKeeper is gone for every broker" from "this broker alone lost it".

A broker whose session lease runs out (`lease`) does not know whether ZooKeeper has
stopped answering everyone (ZooKeeper down, or cut off from every broker) or only
this broker (it is the one cut off). In the second case the controller, which still
has ZooKeeper, will soon elect other leaders for its partitions, so it must fence
itself: stop leading, drop its clients. In the first case nobody can elect anything
(elections are ZooKeeper writes), so fencing only stops every write in the cluster
for as long as the outage lasts; ZooKeeper-mode Kafka keeps serving its leaders then.

The brokers ask each other. From the moment ZooKeeper has been silent for half a
session timeout, a broker asks every other live broker it knows, every
`timeout / 8`, for its Metadata: a broker answers the controller id -1 when it does
not trust any controller, which is when its own ZooKeeper has been silent for half a
session timeout (or it is fenced). When every other broker answers -1 to a round
sent at time `s`, the outage is confirmed as shared until `s + timeout / 4`; an
answer naming a controller ends the confirmation at once, and a round some broker
did not answer (in time: half a round) renews nothing, so the confirmation lapses at
its end. (One late answer, a busy machine's scheduling delay, must not fence a
broker that the next round confirms: every bound below counts from the last round
that every broker confirmed, whatever the rounds after it say.) When the lease runs out while
the outage is confirmed, the broker keeps its leaders, followers and ISR ("rides
out" the outage) and fences as soon as the confirmation ends, without waiting for a
round to fail: a timer fires when it lapses.

Why this is safe (ARCHITECTURE.md, "Invariants", keeps the short form):

- acks=all. A leader acknowledges a batch once every member of its ISR holds it,
  and it can shrink its ISR only by writing ZooKeeper first, so during an outage
  its ISR contains the ISR ZooKeeper holds. Any new leader is elected from
  ZooKeeper's ISR, so it held every batch acknowledged so far; and once it leads it
  stops fetching from the old leader, which from then on can acknowledge nothing
  more with acks=all. So no acknowledged batch is lost and no two leaders
  acknowledge different batches at one offset, whatever the timing: fencing is
  not what keeps acks=all safe, the ISR rule is.
- Recovery. When ZooKeeper comes back, the first broker to reach it may become the
  controller and elect new leaders while the others still ride out the outage.
  That broker's answer turns to its controller id at once, so every broker still
  riding out fences within `timeout / 4` of the controller's first election (the
  last confirmation's validity) plus one round trip. Sessions are what the
  controller waits on: while ZooKeeper was down for everyone, the new ZooKeeper
  leader gives every session a fresh timeout, so a broker that reconnects in time
  keeps its session and its leaderships; a broker whose session expired (the
  outage was a network cut longer than the session timeout) steps down on
  reconnecting and is re-elected or follows.
- acks=1. A batch acknowledged by a leader that rides out the outage while, in
  that last window, another broker was elected is lost when the old leader
  truncates to the new leader's log, as acks=1 batches are lost in any unclean
  change of leader. The window is bounded as above.
- A broker alone in losing ZooKeeper still fences: the others answer a controller
  id (they trust theirs), which ends the confirmation, or do not answer at all (a
  broker cut off from its peers too), which renews none. A broker it does not know of (registered
  after this broker lost ZooKeeper) is not asked; it can only become controller
  once ZooKeeper answers it, which the brokers asked would also see.

Event-loop only; owned by the cluster node.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from broker.tasks import cancel_and_wait
from common.aio import within

log = logging.getLogger(__name__)

# What a round of questions to the other brokers says.
SHARED = "shared"  # every other broker trusts no controller
DISSENT = "dissent"  # some broker trusts a controller: it has ZooKeeper
UNKNOWN = "unknown"  # no dissent, but some broker did not answer (in time)

# Fractions of the session timeout.
DISTRUST_AFTER = 0.5  # silent this long: answer controller -1, start asking peers
ROUND_EVERY = 0.125
CONFIRMED_FOR = 0.25


class SharedOutage:
    """Whether every other broker has lost ZooKeeper too, kept by asking them.

    `silent_s()` is how long ZooKeeper has not answered this broker; `peers()` the
    ids of the other live brokers as last known; `ask(broker_id)` that broker's
    controller id as its Metadata answers it (raises when it cannot be asked);
    `on_lapse()` is called when a confirmation that was in force ends."""

    def __init__(
        self,
        timeout_s: float,
        silent_s: Callable[[], float],
        peers: Callable[[], Iterable[int]],
        ask: Callable[[int], Awaitable[int]],
        on_lapse: Callable[[], None],
    ):
        self.timeout_s = timeout_s
        self.silent_s = silent_s
        self.peers = peers
        self.ask = ask
        self.on_lapse = on_lapse
        self.valid_until = 0.0
        self._task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def distrusted(self) -> bool:
        """True while ZooKeeper has been silent long enough that this broker trusts
        no controller (what it answers its peers)."""
        return self.silent_s() >= DISTRUST_AFTER * self.timeout_s

    def confirmed(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) < self.valid_until

    def start(self) -> None:
        self._task = asyncio.create_task(self._rounds())

    async def stop(self) -> None:
        self._cancel_timer()
        await cancel_and_wait([self._task])

    async def _rounds(self) -> None:
        every = ROUND_EVERY * self.timeout_s
        while True:
            sent = time.monotonic()
            if self.distrusted:
                # each answer within half a round, so that rounds keep their pace
                self._record(await self._round(every / 2), sent)
            else:
                self._record(DISSENT, sent)  # ZooKeeper answers this broker again
            await asyncio.sleep(max(0.0, sent + every - time.monotonic()))

    async def _round(self, timeout_s: float) -> str:
        """SHARED, DISSENT or UNKNOWN: what the other brokers answered."""
        peers = list(self.peers())

        async def one(broker_id: int) -> int:
            return await within(self.ask(broker_id), timeout_s)

        answers = await asyncio.gather(*(one(b) for b in peers), return_exceptions=True)
        log.debug("ZooKeeper outage: peers %s answered %s", peers, answers)
        if any(isinstance(answer, int) and answer != -1 for answer in answers):
            return DISSENT
        if all(answer == -1 for answer in answers):
            return SHARED
        return UNKNOWN

    def _record(self, outcome: str, sent: float) -> None:
        """Renew the confirmation (SHARED), end it (DISSENT), or leave it to lapse."""
        if outcome == SHARED:
            self.valid_until = max(self.valid_until, sent + CONFIRMED_FOR * self.timeout_s)
            self._arm()
        elif outcome == DISSENT:
            was = self.confirmed()
            self.valid_until = 0.0
            self._cancel_timer()
            if was:
                self.on_lapse()

    def _arm(self) -> None:
        """A timer that ends the confirmation when it lapses without a new round."""
        self._cancel_timer()
        delay = max(0.0, self.valid_until - time.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._lapsed)

    def _lapsed(self) -> None:
        self._timer = None
        if not self.confirmed():
            self.valid_until = 0.0
            self.on_lapse()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
