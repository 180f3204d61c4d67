"""How the `Worker` lands a settle (`complete`, `fail`, a workflow's release) through an
outage longer than the store's own retry budget: it tries again, pausing on the worker's
clock, for as long as the work's lease still holds. Past the lease another worker may take
the work over, so the last error is raised then and the queue hands the work out again.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from durably.clock import Clock
from durably.errors import DurablyError

T = TypeVar("T")

FIRST_PAUSE_SECONDS = 0.1
"""The pause after the first failed settle; each later pause doubles, up to the cap."""
PAUSE_CAP_SECONDS = 2.0
"""The longest single pause between two tries of a settle."""


async def settle_within_lease(
    settle: Callable[[], Awaitable[T]],
    *,
    lease_expires_at: float | None,
    clock: Clock,
    logger: logging.Logger,
    what: str,
    fields: dict[str, object],
) -> T:
    """``settle()``'s result, tried again after an error that says it may go away on its
    own (a store that was unavailable), while the next try would still start before
    ``lease_expires_at`` (on ``clock``). Any other error, or the last one, is raised."""
    pause = FIRST_PAUSE_SECONDS
    while True:
        try:
            return await settle()
        except DurablyError as error:
            wait = pause * random.uniform(0.5, 1.0)
            if (
                not error.retryable
                or lease_expires_at is None
                or clock.now() + wait >= lease_expires_at
            ):
                raise
            logger.warning(
                "could not %s (%s); trying again in %.2fs", what, error, wait, extra=fields
            )
        await clock.sleep(wait)
        pause = min(pause * 2, PAUSE_CAP_SECONDS)


__all__ = ["FIRST_PAUSE_SECONDS", "PAUSE_CAP_SECONDS", "settle_within_lease"]
