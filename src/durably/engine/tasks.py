"""Stopping a helper task for certain, and telling a cancel someone asked for from a
stray `asyncio.CancelledError`.

A single ``cancel()`` can be lost: on Python 3.11, `asyncio.wait_for` returns the result
of a wait that completed as the cancel landed and drops the cancel (psycopg-pool waits
for a connection with it). A keep-alive loop whose cancel was dropped runs on, renewing a
claim or a lease nobody uses any more, and whoever awaits it waits with it.
"""

from __future__ import annotations

import asyncio
from typing import Any

RECANCEL_SECONDS = 0.05
"""How long `stop` waits for a cancelled task to end before cancelling it again."""


async def stop(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has ended, cancelling again while it runs on.

    Its result or exception is consumed; a cancel of the caller propagates (``task`` stays
    cancelled).
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=RECANCEL_SECONDS)
    if not task.cancelled():
        task.exception()  # retrieved, so it is not logged as never retrieved


def cancel_requested() -> bool:
    """Whether the running task was asked to stop (`asyncio.Task.cancel`, not withdrawn
    since): an `asyncio.CancelledError` it sees is then that request. Otherwise the error
    came from code it ran, which raised it or awaited something another task cancelled."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


__all__ = ["RECANCEL_SECONDS", "cancel_requested", "stop"]
