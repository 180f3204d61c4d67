"""The cluster client `RedisStoreSettings.client` builds for ``redis+cluster://``: a call
finding the client's connections busy waits for one, as on one server, instead of being
refused at once.

redis-py's cluster client keeps a pool per node that refuses (`MaxConnectionsError`) the
moment it is empty, and its node pools cannot wait. So the client admits at most
``max_connections`` commands and pipelines at once: no node then ever needs more than
that many connections, and a caller beyond them waits up to ``pool_timeout`` seconds for
a turn, then gets `MaxConnectionsError` (which the stores report as `PoolExhaustedError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import MaxConnectionsError

# Set inside an admitted call: the client retries and splits commands by calling itself,
# and a call already admitted must not wait for a second turn (with every turn taken by
# such callers, none would ever be given back).
_admitted: contextvars.ContextVar[bool] = contextvars.ContextVar("durably_admitted", default=False)


class WaitingCluster(RedisCluster):
    """A `RedisCluster` whose callers wait (up to ``pool_timeout`` seconds) for one of
    ``max_connections`` turns."""

    def __init__(self, *args: Any, pool_timeout: float = 5.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool_timeout = pool_timeout
        self.turns = int(kwargs.get("max_connections", 100))
        self._free_turns = asyncio.Semaphore(self.turns)

    @contextlib.asynccontextmanager
    async def admitted(self) -> AsyncIterator[None]:
        """Hold one turn for the block (at once when the caller already holds one)."""
        if _admitted.get():
            yield
            return
        await self._take_turn()
        token = _admitted.set(True)
        try:
            yield
        finally:
            _admitted.reset(token)
            self._free_turns.release()

    async def _take_turn(self) -> None:
        if not self._free_turns.locked():  # a free turn is taken at once (no timer)
            await self._free_turns.acquire()
            return
        try:  # every turn taken: wait for one, bounded
            await asyncio.wait_for(self._free_turns.acquire(), self.pool_timeout)
        except TimeoutError:
            raise MaxConnectionsError(
                f"no free connection within {self.pool_timeout} s (max_connections={self.turns})"
            ) from None

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        # Written out rather than through `admitted`: every command passes here.
        if _admitted.get():
            return await super().execute_command(*args, **kwargs)
        await self._take_turn()
        token = _admitted.set(True)
        try:
            return await super().execute_command(*args, **kwargs)
        finally:
            _admitted.reset(token)
            self._free_turns.release()

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        if shard_hint:
            return super().pipeline(transaction, shard_hint)  # refused as redis-py does
        return _WaitingPipeline(self, transaction)  # type: ignore[abstract]


class _WaitingPipeline(ClusterPipeline):
    """A pipeline that runs on one turn of its client."""

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        client = self.cluster_client
        assert isinstance(client, WaitingCluster)
        async with client.admitted():
            return await super().execute(raise_on_error, allow_redirections)


__all__ = ["WaitingCluster"]
