"""broker.tasks: a bounded cancel_and_wait that re-cancels a task which lost its cancellation."""

import asyncio
import logging

import pytest

from broker.tasks import cancel_and_wait


def test_cancel_and_wait_recancels_a_task_that_lost_its_cancellation():
    async def absorbs_one_cancel(started: asyncio.Event):
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass  # what asyncio.wait_for does in Python 3.11 when the result is there
        await asyncio.Event().wait()

    async def main():
        started = asyncio.Event()
        task = asyncio.create_task(absorbs_one_cancel(started))
        await started.wait()
        await cancel_and_wait([task], timeout_s=10)
        assert task.cancelled()

    asyncio.run(main())


def test_cancel_and_wait_gives_up_on_a_task_that_ignores_cancellation(caplog):
    async def stubborn(started: asyncio.Event, release: asyncio.Event):
        started.set()
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                pass

    async def main():
        started, release = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(stubborn(started, release), name="stubborn")
        await started.wait()
        await cancel_and_wait([task], timeout_s=0.3)
        assert not task.done()
        release.set()
        await task

    with caplog.at_level(logging.ERROR, logger="broker.tasks"):
        asyncio.run(main())
    assert "task stubborn did not stop" in caplog.text


def test_cancel_and_wait_logs_a_failure_and_stops_the_other_tasks(caplog):
    async def fails_on_cancel():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("boom") from None

    async def main():
        failing = asyncio.create_task(fails_on_cancel(), name="failing")
        other = asyncio.create_task(asyncio.sleep(3600))
        await asyncio.sleep(0)
        await cancel_and_wait([failing, None, other])
        assert other.cancelled()

    with caplog.at_level(logging.ERROR, logger="broker.tasks"):
        asyncio.run(main())
    assert "task failing failed while stopping" in caplog.text


def test_cancel_and_wait_does_not_swallow_its_callers_cancellation():
    async def main():
        stubborn_started = asyncio.Event()

        async def slow_to_stop():
            stubborn_started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await asyncio.sleep(0.2)
                raise

        task = asyncio.create_task(slow_to_stop())
        await stubborn_started.wait()
        stopper = asyncio.create_task(cancel_and_wait([task], timeout_s=10))
        await asyncio.sleep(0.05)
        stopper.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopper
        await asyncio.wait({task})

    asyncio.run(main())
