"""Telling a ZooKeeper outage every broker shares from one broker's own
(broker.cluster.zk_outage): the confirmation rules, with the peers' answers given."""

import asyncio
import time

import pytest

from broker.cluster.zk_outage import (
    CONFIRMED_FOR,
    DISSENT,
    DISTRUST_AFTER,
    SHARED,
    UNKNOWN,
    SharedOutage,
)
from common.aio import within

TIMEOUT_S = 4.0


def outage(answers: dict, silent_s: float = TIMEOUT_S, lapses: list | None = None):
    """A SharedOutage whose peers answer `answers[broker_id]` (an exception is
    raised), ZooKeeper silent for `silent_s`."""

    async def ask(broker_id: int) -> int:
        answer = answers[broker_id]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return SharedOutage(
        TIMEOUT_S,
        lambda: silent_s,
        lambda: list(answers),
        ask,
        lambda: (lapses if lapses is not None else []).append(time.monotonic()),
    )


def test_a_broker_distrusts_its_controller_after_half_a_session_of_silence():
    assert not outage({}, silent_s=DISTRUST_AFTER * TIMEOUT_S - 0.01).distrusted
    assert outage({}, silent_s=DISTRUST_AFTER * TIMEOUT_S).distrusted


@pytest.mark.parametrize(
    "answers, outcome",
    [
        ({1: -1, 2: -1}, SHARED),  # every other broker lost ZooKeeper too
        ({1: -1, 2: 1}, DISSENT),  # broker 2 trusts a controller: it has ZooKeeper
        ({1: OSError("unreachable"), 2: 1}, DISSENT),
        ({1: -1, 2: OSError("unreachable")}, UNKNOWN),  # cannot tell: renews nothing
        ({1: -1, 2: TimeoutError()}, UNKNOWN),
        ({}, SHARED),  # no other broker to elect anything
    ],
)
def test_an_outage_is_shared_only_if_every_other_broker_says_so(answers, outcome):
    assert asyncio.run(outage(answers)._round(1.0)) == outcome


def test_a_confirmation_lasts_a_quarter_session_from_when_the_round_was_sent():
    async def scenario():
        shared = outage({1: -1})
        sent = time.monotonic()
        shared._record(SHARED, sent)
        assert shared.confirmed(sent + CONFIRMED_FOR * TIMEOUT_S - 0.01)
        assert not shared.confirmed(sent + CONFIRMED_FOR * TIMEOUT_S)
        shared._cancel_timer()

    asyncio.run(scenario())


def test_a_dissenting_round_ends_the_confirmation_at_once_and_says_so():
    async def scenario():
        lapses: list = []
        shared = outage({1: -1}, lapses=lapses)
        now = time.monotonic()
        shared._record(SHARED, now)
        shared._record(DISSENT, now)
        assert not shared.confirmed() and len(lapses) == 1
        shared._record(DISSENT, now)  # nothing was in force: no second report
        assert len(lapses) == 1

    asyncio.run(scenario())


def test_an_unanswered_round_neither_renews_nor_ends_the_confirmation():
    async def scenario():
        lapses: list = []
        shared = outage({1: -1}, lapses=lapses)
        sent = time.monotonic()
        shared._record(SHARED, sent)
        shared._record(UNKNOWN, sent + 0.5)  # a late answer on a busy machine
        assert shared.confirmed() and lapses == []
        assert not shared.confirmed(sent + CONFIRMED_FOR * TIMEOUT_S)  # the bound holds
        shared._cancel_timer()

    asyncio.run(scenario())


def test_a_confirmation_not_renewed_lapses_by_its_timer():
    async def scenario():
        lapsed = asyncio.Event()
        shared = SharedOutage(TIMEOUT_S, lambda: TIMEOUT_S, lambda: [1], None, lapsed.set)
        # a round sent long enough ago that its confirmation has 50 ms left
        shared._record(SHARED, time.monotonic() - CONFIRMED_FOR * TIMEOUT_S + 0.05)
        assert shared.confirmed() and not lapsed.is_set()
        await within(lapsed.wait(), 5)
        assert not shared.confirmed()

    asyncio.run(scenario())


def test_no_peer_is_asked_while_zookeeper_answers():
    asked: list = []

    async def scenario():
        async def ask(broker_id: int) -> int:
            asked.append(broker_id)
            return -1

        shared = SharedOutage(0.4, lambda: 0.0, lambda: [1, 2], ask, lambda: None)
        shared.start()
        await asyncio.sleep(0.2)  # four rounds' time
        await shared.stop()
        assert not shared.confirmed()

    asyncio.run(scenario())
    assert asked == []
