"""What every Redis store shares: the client, the key namespace, retries and size checks."""

from __future__ import annotations

import asyncio
import functools
import warnings
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import SecretStr
from redis.exceptions import NoScriptError

from durably.clock import Clock, SystemClock
from durably.errors import InvalidInputError, StatePersistenceError
from durably.redis.keys import DEFAULT_KEY_PREFIX, valid_key_prefix
from durably.redis.pool import pool_size
from durably.redis.replication import ReplicaWait
from durably.redis.retry import Retry
from durably.redis.settings import DEFAULT_MAX_VALUE_BYTES, RedisStoreSettings

if TYPE_CHECKING:
    from durably.redis.scripts import Script

T = TypeVar("T")


class RedisConnection:
    """A client plus the options read from `RedisStoreSettings` (or their defaults)."""

    def __init__(
        self,
        client: Any,
        settings: RedisStoreSettings | None,
        key_prefix: str | None,
        clock: Clock | None = None,
        *,
        namespace: str | None = None,
    ) -> None:
        if settings is not None and settings.replicas:
            client = ReplicaWait(client, settings.replicas, settings.replica_timeout_seconds)
        self.client = client
        if namespace is not None:
            # The keyword's old name (before 0.2; RedisScheduler's was key_namespace=).
            if key_prefix is not None and key_prefix != namespace:
                raise InvalidInputError("give key_prefix= only (namespace= is its old name)")
            warnings.warn(
                "the Redis key prefix is now given as key_prefix= (namespace= on a "
                "RedisScheduler names the workflow kind it serves)",
                DeprecationWarning,
                stacklevel=3,
            )
            key_prefix = namespace
        chosen = key_prefix or (settings.key_prefix if settings else DEFAULT_KEY_PREFIX)
        self.key_prefix = valid_key_prefix(chosen)
        self.max_value_bytes = settings.max_value_bytes if settings else DEFAULT_MAX_VALUE_BYTES
        defaults = settings or RedisStoreSettings(dsn=SecretStr("unused"))
        # Pauses between tries run on the store's clock (a `ManualClock` moves through them).
        self.retry = Retry(
            max_attempts=defaults.max_attempts,
            backoff_seconds=defaults.backoff_seconds,
            budget_seconds=defaults.retry_budget_seconds,
            cap_seconds=defaults.backoff_cap_seconds,
            pool_size=pool_size(client),
            clock=clock or SystemClock(),
            jitter=defaults.jitter,
        )

    async def bounded(self, calls: Iterable[Awaitable[T]]) -> list[T]:
        """Await ``calls`` (coroutines, started here) with a few in flight at once, their
        results in order: a batch takes at most half the client's pool (at most 8), so it
        neither exhausts a pool that refuses nor crowds out the calls waiting beside it."""
        share = asyncio.Semaphore(max(1, min(8, (self.retry.pool_size or 16) // 2)))

        async def one(call: Awaitable[T]) -> T:
            async with share:
                return await call

        return list(await asyncio.gather(*(one(call) for call in calls)))

    def check_size(self, text: str, what: str) -> None:
        """Refuse ``text`` over ``max_value_bytes`` before anything is sent."""
        self.check_bytes(len(text.encode()), lambda: what)

    def check_bytes(self, size: int, what: Callable[[], str]) -> None:
        """Refuse ``size`` bytes over ``max_value_bytes``; ``what`` names the value (built
        only for the error)."""
        if size > self.max_value_bytes:
            raise StatePersistenceError(
                "redis",
                "too_large",
                f"{what()} is {size} bytes, over max_value_bytes={self.max_value_bytes}",
            )

    async def run_many(
        self, script: Script, calls: Sequence[tuple[Any, ...]], numkeys: int = 1
    ) -> list[Any]:
        """Run ``script`` once per call (``numkeys`` keys, then its arguments), all sent
        together and retried as one (`state`): each reply in order; one the script
        refused raises. Calls the server's script cache missed (a server that never ran
        the script, or flushed it) go again: the first alone, which loads the script on
        its server, then the rest together, until none misses."""
        client = self.client
        replies = await self.state(lambda: script.run_many(client, calls, numkeys))
        missed = [n for n, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        while missed:
            first, rest = missed[0], missed[1:]
            call = functools.partial(script.run, client, numkeys, *calls[first])
            replies[first] = await self.state(call)
            again = [calls[n] for n in rest]
            if again:
                send = functools.partial(script.run_many, client, again, numkeys)
                answered = await self.state(send)
                for n, reply in zip(rest, answered, strict=True):
                    replies[n] = reply
            missed = [n for n in rest if isinstance(replies[n], NoScriptError)]
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    async def state(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run ``operation`` with retries; `StatePersistenceError` once they are spent."""
        return await self.retry.run(
            operation, lambda detail: StatePersistenceError("redis", "unavailable", detail)
        )


def text(value: object) -> str:
    """A reply as text (clients may or may not decode responses)."""
    if isinstance(value, bytes):
        return value.decode()
    return str(value)


def pairs(flat: list[Any]) -> dict[str, str]:
    """An HGETALL-style flat list (or a dict) as a dict of text."""
    if isinstance(flat, dict):
        return {text(k): text(v) for k, v in flat.items()}
    return {text(flat[i]): text(flat[i + 1]) for i in range(0, len(flat), 2)}


def raw_pairs(flat: list[Any] | dict[Any, Any]) -> dict[Any, Any]:
    """An HGETALL-style flat list (or a dict) as a dict, keys and values as the client
    gave them (bytes, unless it decodes responses)."""
    if isinstance(flat, dict):
        return flat
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def number(value: float) -> str:
    """A float as text Lua and Redis parse back to exactly the same double."""
    return repr(float(value))


__all__ = ["RedisConnection", "number", "pairs", "raw_pairs", "text"]
