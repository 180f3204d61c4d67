"""Waiting out a failover: bounded, doubling, jittered retries of transient errors.

Jitter matters because every worker that lost the server together retries together.
An exhausted pool is not transient (the server is fine, this process is over-subscribed):
it surfaces at once as `PoolExhaustedError`.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    MaxConnectionsError,
    ReadOnlyError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from durably.clock import Clock, SystemClock
from durably.errors import PoolExhaustedError
from durably.stores.backoff import FAILOVER_SECONDS, PAUSE_CAP_SECONDS, Jitter, pause_seconds

T = TypeVar("T")

TRANSIENT: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    ReadOnlyError,
    SlotNotCoveredError,
    TryAgainError,
    ConnectionError,
    TimeoutError,
)
# What `Retry.call` looks at: the transient errors, and the cluster client's report that it
# reached none of its nodes (all down or restarting), which is a `RedisClusterException`
# raised from the connection error, not a `ConnectionError` itself.
_CAUGHT: tuple[type[BaseException], ...] = (*TRANSIENT, RedisClusterException)


def transient(error: BaseException) -> bool:
    """Whether ``error`` is worth waiting out (a cluster client's "cannot be connected" is)."""
    return isinstance(error, TRANSIENT) or (
        isinstance(error, RedisClusterException) and isinstance(error.__cause__, TRANSIENT)
    )


@dataclass(frozen=True, slots=True)
class Retry:
    """Try an operation up to ``max_attempts`` times and for ``budget_seconds`` after its
    first failure, pausing between tries as `pause_seconds` says (at most ``cap_seconds``
    each), on ``clock``."""

    max_attempts: int = 100
    backoff_seconds: float = 0.05
    pool_size: int | None = None
    budget_seconds: float = FAILOVER_SECONDS
    cap_seconds: float = PAUSE_CAP_SECONDS
    clock: Clock = field(default_factory=SystemClock)
    jitter: Jitter = random.random

    async def run(
        self, operation: Callable[[], Awaitable[T]], give_up: Callable[[str], Exception]
    ) -> T:
        """The operation's result; ``give_up(detail)`` is raised once the budget is spent."""
        try:
            return await self.call(operation)
        except RetriesSpent as spent:
            raise give_up(spent.detail) from None

    async def call(self, function: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``function(*args)``'s result, retried; `RetriesSpent` once the budget is spent.
        The hot paths use it to avoid building closures per call (they cost the cyclic
        garbage collector's time as well as their own)."""
        deadline: float | None = None  # set at the first failure
        for attempt in range(1, self.max_attempts + 1):
            try:
                return await function(*args)
            except MaxConnectionsError as refused:
                raise PoolExhaustedError("redis", self.pool_size, str(refused)) from None
            except _CAUGHT as error:
                if not transient(error):
                    raise
                pause = pause_seconds(self.backoff_seconds, attempt, self.jitter, self.cap_seconds)
                now = self.clock.now()
                if deadline is None:
                    deadline = now + self.budget_seconds
                if attempt >= self.max_attempts or now + pause > deadline:
                    # The error text can carry a host and port, never the DSN's password.
                    raise RetriesSpent(type(error).__name__) from None
                await self.clock.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover


class RetriesSpent(Exception):
    """The retry budget is spent; ``detail`` names the last transient error's type."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


__all__ = ["TRANSIENT", "RetriesSpent", "Retry", "transient"]
