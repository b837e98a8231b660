"""Share sessions (KIP-932), as Kafka's ShareSessionCache keeps them, without I/O.

A member's ShareFetch and ShareAcknowledge requests to one broker form a session
keyed by (group id, member id). Epoch 0 opens it (replacing an open one) with the
partitions the request names, and may carry no acknowledgement; every later request
carries the session's epoch, which then moves up by one (wrapping from INT32_MAX to
1); it adds the partitions it names and drops its forgotten ones. Epoch -1 closes
the session after its acknowledgements: what the member still holds is released.
"""

from __future__ import annotations

import dataclasses

from broker.protocol import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT32_MAX = 2**31 - 1

PartitionKey = tuple[str, int]  # (topic name, partition)


@dataclasses.dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    partitions: dict[PartitionKey, None]  # insertion-ordered set
    last_used_ms: int = 0


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _INT32_MAX else epoch + 1


class ShareSessionCache:
    """The sessions open on this broker; at most `max_sessions`
    (`group.share.max.share.sessions`): a new one past it is refused with
    SHARE_SESSION_LIMIT_REACHED."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def check(self, group_id: str, member_id: str, epoch: int) -> ErrorCode:
        """Whether a request at `epoch` may go on (before it changes anything)."""
        if epoch in (INITIAL_EPOCH,):
            if (group_id, member_id) not in self.sessions and len(
                self.sessions
            ) >= self.max_sessions:
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED
            return ErrorCode.NONE
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return ErrorCode.NONE

    def open(
        self, group_id: str, member_id: str, now_ms: int
    ) -> tuple[ShareSession, ShareSession | None]:
        """A new session at epoch 1 (the next request's); returns it and the one it
        replaced."""
        old = self.sessions.pop((group_id, member_id), None)
        session = ShareSession(group_id, member_id, 1, {}, now_ms)
        self.sessions[(group_id, member_id)] = session
        return session, old

    def advance(self, session: ShareSession, now_ms: int) -> None:
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def idle(self, now_ms: int, idle_ms: int) -> list[ShareSession]:
        """Remove and return the sessions unused for `idle_ms` (a member that went away
        without closing its session)."""
        gone = [s for s in self.sessions.values() if now_ms - s.last_used_ms >= idle_ms]
        for session in gone:
            del self.sessions[(session.group_id, session.member_id)]
        return gone
