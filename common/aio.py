"""Awaiting with a timeout without losing a cancellation, for every package (broker,
agent, sources, sinks, console).

Python 3.11's `asyncio.wait_for` loses a cancellation: when the awaitable it waits for
has finished but `wait_for` has not resumed yet (the awaitable's result arrived in the
same event loop iteration as the `cancel()`), it returns that result instead of raising
CancelledError. A task looping around such an await (the broker's controller and
replica fetchers, a channel's take, a source's read loop) then goes on to its next
await and sits there for good: a process told to stop that never exits. `within()` is
built on `asyncio.timeout`, which keeps cancellations; use it instead of
`asyncio.wait_for` (ruff's TID251 rejects the latter, see pyproject.toml).
"""

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(aw: Awaitable[T], timeout_s: float | None) -> T:
    """`await aw`, raising TimeoutError after `timeout_s` (None: no limit):
    `asyncio.wait_for` without its lost cancellations (see the module docstring)."""
    async with asyncio.timeout(timeout_s):
        return await aw
