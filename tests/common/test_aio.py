"""common.aio: a timeout that never loses a cancellation."""

import asyncio

import pytest

from common.aio import within


async def _loop_around(await_once, forever: asyncio.Event) -> None:
    """Like the controller's event loop or a replica fetcher: an await with a timeout,
    then a wait for the next piece of work."""
    await await_once()
    await forever.wait()


async def _cancel_as_the_result_arrives(await_with_timeout) -> asyncio.Task:
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    task = asyncio.create_task(_loop_around(lambda: await_with_timeout(fut), asyncio.Event()))
    await asyncio.sleep(0)  # the task waits for `fut`
    fut.set_result("answer")  # the answer and the cancel in one event loop iteration
    task.cancel()
    await asyncio.wait({task}, timeout=0.5)
    return task


def test_within_keeps_a_cancel_that_arrives_with_the_result():
    async def main():
        task = await _cancel_as_the_result_arrives(lambda fut: within(fut, 10))
        assert task.done() and task.cancelled()

    asyncio.run(main())


def test_within_returns_the_result():
    async def main():
        fut = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(fut.set_result, "answer")
        assert await within(fut, 10) == "answer"
        assert await within(asyncio.sleep(0, "now"), None) == "now"

    asyncio.run(main())


def test_within_raises_timeout_error_and_cancels_what_it_waited_for():
    async def main():
        slow = asyncio.create_task(asyncio.sleep(3600))
        with pytest.raises(TimeoutError):
            await within(slow, 0.01)
        await asyncio.sleep(0)
        assert slow.cancelled()

    asyncio.run(main())
