"""Stopping background tasks the same way everywhere in the broker.

Cancellation must never be lost, or a broker's shutdown waits forever for a task that
was told to stop and went on running. Awaits with a timeout use `common.aio.within`
(not `asyncio.wait_for`, which can lose a cancellation: see `common.aio`), and
`cancel_and_wait()` cancels again a task that outlives a cancellation, and gives up on
it (logged) after a bound instead of waiting forever.
"""

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 2.0  # how long cancel_and_wait waits for tasks to finish
RECANCEL_S = 0.25  # a task still running this long after a cancel is cancelled again


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task | None], timeout_s: float = STOP_TIMEOUT_S
) -> None:
    """Cancel every task, then wait for each to finish, at most `timeout_s`.

    The tasks' own CancelledError is expected and absorbed; another exception a task
    ends with is logged (one part failing must not keep the rest from stopping). A task
    still running `RECANCEL_S` after a cancellation is cancelled again (it may have lost
    the first one); one still running after `timeout_s` is logged with its stack and
    left behind. If the task calling this is itself being cancelled, that cancellation
    is re-raised, never swallowed.
    """
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    pending = {t for t in live if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while pending:
        left = deadline - loop.time()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(left, RECANCEL_S))
        for task in pending:
            task.cancel()
    for task in pending:
        log.error(
            "task %s did not stop within %.1f s of being cancelled; left running at:\n%s",
            task.get_name(),
            timeout_s,
            "".join(_stack(task)) or "  (no stack)\n",
        )
    for task in live:
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.error("task %s failed while stopping", task.get_name(), exc_info=task.exception())


def _stack(task: asyncio.Task) -> list[str]:
    return [
        f"  {f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}\n" for f in task.get_stack()
    ]
