"""The cluster client `RedisStoreSettings.client` builds for ``redis+cluster://``: a call
finding the client's connections busy waits for one, as on one server, instead of being
refused at once; and a script call goes straight to its slot's primary.

redis-py's cluster client keeps a pool per node that refuses (`MaxConnectionsError`) the
moment it is empty, and its node pools cannot wait. So the client admits at most
``max_connections`` commands and pipelines at once: no node then ever needs more than
that many connections, and a caller beyond them waits up to ``pool_timeout`` seconds for
a turn, then gets `MaxConnectionsError` (which the stores report as `PoolExhaustedError`).

Its ``execute_command`` costs about twice a script call's own client time on one server
(the slot read from the command's keys, request policies, metrics, retries), which made a
drain on a cluster 1.4x to 1.5x the client time of one on a standalone server. `routed`
sends a call the caller has packed to the primary its slot table names, on one of that
node's connections, as `durably.redis.wire` does on a standalone pool; what is not that
plain case goes through ``execute_command``, which handles it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MasterDownError,
    MaxConnectionsError,
    MovedError,
    ReadOnlyError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from durably.redis.wire import observed, read, send

# Set inside an admitted call: the client retries and splits commands by calling itself,
# and a call already admitted must not wait for a second turn (with every turn taken by
# such callers, none would ever be given back).
_admitted: contextvars.ContextVar[bool] = contextvars.ContextVar("durably_admitted", default=False)

# Whether this redis-py's cluster nodes lend a connection, and take it back, in calls of
# their own (redis-py 6 on; `routed` uses them, else every call goes through
# execute_command).
_LENDS = all(
    hasattr(ClusterNode, name) for name in ("acquire_connection", "release", "disconnect_if_needed")
)

# Replies and failures `routed` leaves to execute_command, which follows the cluster
# through them: the slot moved (its table is refreshed), the node is failing over or not
# a primary any more, or the connection broke (the call is sent again there, as the
# stores' own retry would send it).
_REROUTED = (
    MovedError,
    AskError,
    TryAgainError,
    ClusterDownError,
    MasterDownError,
    ReadOnlyError,
    RedisConnectionError,
    RedisTimeoutError,
)


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

    async def routed(self, key: str | bytes, packed: bytes | None, *command: Any) -> Any:
        """The reply to ``command`` (packed in the protocol as ``packed``, None when the
        caller could not pack it), a command of one slot, ``key``'s: sent on a connection
        of the primary this client's slot table names for it, on one turn. Anything but
        that plain case goes through ``execute_command``: no node known for the slot
        (the layout not read yet), redis-py's metrics switched on, a reply or failure of
        `_REROUTED`. An error reply (a script's, NOSCRIPT) is raised as redis-py raises it.
        """
        if packed is None or not _LENDS or observed():
            return await self.execute_command(*command)
        try:
            node = self.nodes_manager.get_node_from_slot(
                key_slot(key.encode() if isinstance(key, str) else key)
            )
        except SlotNotCoveredError:
            return await self.execute_command(*command)
        # Written out rather than through `admitted`, as in execute_command.
        held = _admitted.get()
        if not held:
            await self._take_turn()
        token = _admitted.set(True)
        try:
            connection = node.acquire_connection()
            try:
                await node.disconnect_if_needed(connection)
                await send(connection, packed)
                return await read(connection)
            except _REROUTED:
                pass
            finally:
                node.release(connection)
            return await super().execute_command(*command)
        finally:
            _admitted.reset(token)
            if not held:
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
