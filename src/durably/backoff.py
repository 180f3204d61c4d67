"""How every backing waits between tries of a transient failure (a failover, a busy lock):
doubling pauses, jittered so that clients that failed together do not retry together.

The pause is slept on the store's `Clock` and the jitter drawn from an injectable source
(`StoreSettings.jitter`), so failover timing can be tested with a `ManualClock` and a fixed
jitter.
"""

from __future__ import annotations

from collections.abc import Callable

Jitter = Callable[[], float]
"""A source of jitter: each call a float in [0, 1) (`random.random` by default)."""


def pause_seconds(backoff_seconds: float, attempt: int, jitter: Jitter) -> float:
    """The pause after failed try ``attempt`` (1-based): ``backoff_seconds * 2**(attempt-1)``
    scaled into [1/2, 1) of itself by one draw of ``jitter``."""
    return backoff_seconds * 2.0 ** (attempt - 1) * (0.5 + 0.5 * jitter())


__all__ = ["Jitter", "pause_seconds"]
