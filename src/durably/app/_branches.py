"""`gather`: branches of a workflow body run concurrently, as a durable pass needs them.

When a branch suspends (a wait, a sleep, a child), the others run on until they finish or
suspend too, and then the suspension is raised, so the pass reports once, with everything
its branches wait for. When a branch fails, the others are cancelled as a task group
cancels them (a step already running finishes and is recorded first) and waited for, and
the failure is raised.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import Any

from durably.errors import InvalidInputError, Suspended


async def gather(aws: tuple[Awaitable[Any], ...], return_exceptions: bool) -> list[Any]:
    """The results of ``aws``, run concurrently, in their order.

    A failure (the first to end, in argument order among those ending together) cancels
    the branches still running and is raised once they ended; with ``return_exceptions``
    an `Exception` is returned in its branch's place instead and cancels nothing. A
    suspension is raised once every branch ended, unless a failure is. A cancellation of
    the caller cancels every branch and waits for them.
    """
    for n, aw in enumerate(aws):
        if not inspect.isawaitable(aw):
            for other in aws:  # started nothing: close what would warn it was never awaited
                if inspect.iscoroutine(other):
                    other.close()
            raise InvalidInputError(
                f"ctx.gather takes awaitables; argument {n} is a {type(aw).__name__}"
            )
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    failure: BaseException | None = None
    suspension: Suspended | None = None
    pending = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task not in done:
                    continue
                error = _error_of(task)
                if error is None:
                    continue
                if isinstance(error, Suspended):
                    suspension = suspension or error
                elif failure is None and not (return_exceptions and isinstance(error, Exception)):
                    failure = error
                    for other in pending:
                        other.cancel()
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        raise
    if failure is not None:
        raise failure
    if suspension is not None:
        raise suspension
    results: list[Any] = []
    for task in tasks:
        error = _error_of(task)
        results.append(task.result() if error is None else error)
    return results


def _error_of(task: asyncio.Future[Any]) -> BaseException | None:
    """What ``task`` raised (its `asyncio.CancelledError` if it was cancelled), or None."""
    if task.cancelled():
        try:
            task.result()
        except asyncio.CancelledError as cancelled:
            return cancelled
    return task.exception()


__all__ = ["gather"]
