"""How every backing waits between tries of a transient failure (a failover, a busy lock):
doubling pauses, jittered so that clients that failed together do not retry together.

The pause is slept on the store's `Clock` and the jitter drawn from an injectable source
(`StoreSettings.jitter`), so failover timing can be tested with a `ManualClock` and a fixed
jitter.
"""

from __future__ import annotations

import math
from collections.abc import Callable

Jitter = Callable[[], float]
"""A source of jitter: each call a float in [0, 1) (`random.random` by default)."""

FAILOVER_SECONDS = 10.0
"""How long a call to a server (PostgreSQL, Redis) keeps trying by default: longer than a
typical failover (a Redis Cluster promotion took 3.6-4.3 s; a managed PostgreSQL failover
takes seconds to tens of seconds)."""
PAUSE_CAP_SECONDS = 1.0
"""The longest single pause of that default budget."""


def pause_seconds(
    backoff_seconds: float, attempt: int, jitter: Jitter, cap_seconds: float = math.inf
) -> float:
    """The pause after failed try ``attempt`` (1-based): ``backoff_seconds * 2**(attempt-1)``
    up to ``cap_seconds``, scaled into [1/2, 1) of itself by one draw of ``jitter``."""
    doubled = backoff_seconds * 2.0 ** min(attempt - 1, 64)
    return min(doubled, cap_seconds) * (0.5 + 0.5 * jitter())


def full_jitter_seconds(
    initial_seconds: float,
    attempt: int,
    jitter: Jitter,
    *,
    cap_seconds: float = math.inf,
    multiplier: float = 2.0,
) -> float:
    """The wait before retry ``attempt`` (1-based) of a task, with full jitter:
    ``uniform(0, min(cap_seconds, initial_seconds * multiplier ** (attempt - 1)))``, one
    draw of ``jitter`` scaling the whole capped wait. Items that failed together are then
    spread over the whole window instead of retrying in lockstep, and the expected total
    load stays bounded by the capped exponential."""
    if initial_seconds <= 0:
        return 0.0
    try:
        grown = initial_seconds * float(multiplier) ** min(max(attempt - 1, 0), 1024)
    except OverflowError:  # a long run of attempts: past any cap
        grown = math.inf
    return min(grown, cap_seconds) * jitter()


__all__ = [
    "FAILOVER_SECONDS",
    "PAUSE_CAP_SECONDS",
    "Jitter",
    "full_jitter_seconds",
    "pause_seconds",
]
