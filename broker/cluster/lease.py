"""How long this broker may still trust its ZooKeeper session: the session lease.

A broker leads partitions only because ZooKeeper says so, and ZooKeeper says so only
while the broker's session lives. ZooKeeper expires a session `session timeout` after
it last heard from the client, but the client learns of the expiry only when it gets
through again: a broker cut off from ZooKeeper (and from its followers, while clients
still reach it) would otherwise go on answering "I lead" long after the controller
has elected someone else.

The lease closes that gap from the broker's side. Every `timeout / 4` the broker sends
ZooKeeper a cheap request (`exists` on the broker registrations). ZooKeeper resets the
session's clock when it receives a request, which is after the broker sent it, so the
session cannot expire before `sent + timeout` of the last answered request. The lease
runs until `sent + timeout * (1 - MARGIN)`: the broker gives up its roles a little
before ZooKeeper could possibly expire it, hence before any controller could see it
gone and elect another leader. The margin covers scheduling delays of the timer.

`on_expired()` is called once when the lease runs out, `on_renewed()` once when a
request is answered again after that (same session or, after an expiry, a new one).
Event-loop only. The requested session timeout is used; a ZooKeeper server that
negotiates a shorter one (requests above its `maxSessionTimeout`) breaks the bound,
so keep `zookeeper.session.timeout.ms` within the server's limits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from broker.tasks import cancel_and_wait

log = logging.getLogger(__name__)

MARGIN = 0.1
PROBES_PER_TIMEOUT = 4


class SessionLease:
    """The time until which the session is certainly alive, renewed by answered probes."""

    def __init__(self, timeout_s: float, now: float | None = None):
        self.timeout_s = timeout_s
        self.expires_at = (time.monotonic() if now is None else now) + self.length_s
        self.expired = False

    @property
    def length_s(self) -> float:
        return self.timeout_s * (1 - MARGIN)

    def renew(self, sent_at: float, now: float) -> bool:
        """A request sent at `sent_at` was answered at `now`. True if that ends an
        expiry; a late answer to a request older than a lease ends none."""
        self.expires_at = max(self.expires_at, sent_at + self.length_s)
        if self.expired and now < self.expires_at:
            self.expired = False
            return True
        return False

    def check(self, now: float) -> bool:
        """True once, the first time `now` is past the lease."""
        if self.expired or now < self.expires_at:
            return False
        self.expired = True
        return True


class LeaseKeeper:
    """Probes ZooKeeper and calls `on_expired` / `on_renewed` on the event loop."""

    def __init__(
        self,
        zk,
        path: str,
        timeout_s: float,
        on_expired: Callable[[float], None],
        on_renewed: Callable[[], None],
    ):
        self.zk = zk
        self.path = path
        self.lease = SessionLease(timeout_s)
        self.on_expired = on_expired
        self.on_renewed = on_renewed
        self.interval_s = timeout_s / PROBES_PER_TIMEOUT
        self._last_answer = time.monotonic()
        self._task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def expired(self) -> bool:
        return self.lease.expired

    def silent_s(self) -> float:
        """How long since ZooKeeper last answered a probe."""
        return time.monotonic() - self._last_answer

    def start(self) -> None:
        now = time.monotonic()
        self.lease.renew(now, now)
        self._task = asyncio.create_task(self._probe_forever())
        self._arm()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        await cancel_and_wait([self._task])

    async def _probe_forever(self) -> None:
        while True:
            sent = time.monotonic()
            try:
                await self.zk.call("exists", self.path, timeout_s=self.interval_s)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("ZooKeeper probe unanswered: %s", e)
            else:
                self.answered(sent)
            await asyncio.sleep(max(0.0, sent + self.interval_s - time.monotonic()))

    def answered(self, sent: float) -> None:
        """ZooKeeper answered a request sent at `sent` (a probe, or another request
        whose answer proves the session alive)."""
        self._last_answer = time.monotonic()
        if self.lease.renew(sent, self._last_answer):
            self.on_renewed()
        self._arm()

    def _arm(self) -> None:
        """(Re)set the timer that fires when the lease runs out."""
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        delay = self.lease.expires_at - time.monotonic()
        self._timer = loop.call_later(max(0.0, delay), self._expire)

    def poll(self) -> None:
        """Expire now if the lease ran out and the timer has not fired yet (the event
        loop runs socket callbacks before due timers: a produce read right after a
        stall must not be appended by a broker that should have been fenced)."""
        if not self.lease.expired and time.monotonic() >= self.lease.expires_at:
            self._expire()

    def _expire(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        if self.lease.check(now):
            self.on_expired(now - self._last_answer)
        elif not self.lease.expired:
            self._arm()
