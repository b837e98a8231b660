"""Stopping background tasks the same way everywhere in the broker."""

import asyncio
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task | None]) -> None:
    """Cancel every task, then wait for each to finish.

    The tasks' own CancelledError is expected and absorbed; if the task calling this is
    itself being cancelled, that cancellation is re-raised, never swallowed.
    """
    tasks = [t for t in tasks if t is not None]
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():
                raise
