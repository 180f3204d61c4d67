"""The connection pool `RedisStoreSettings.client` builds: a caller waits for a free
connection, as on PostgreSQL, instead of being refused while the pool is busy."""

from __future__ import annotations

from typing import Any

from redis.asyncio import BlockingConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError


class WaitingPool(BlockingConnectionPool):
    """Waits up to ``timeout`` seconds for a free connection, then raises
    `MaxConnectionsError` (which the stores report as `PoolExhaustedError`, at once).

    redis-py's own pool reports that wait running out as a plain ``ConnectionError``,
    which reads as a server that went away and would be retried as one.
    """

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
        except RedisConnectionError as error:
            # The wait for a free connection is the one failure redis-py raises from a
            # TimeoutError; a connection that cannot reach the server is reported otherwise.
            if isinstance(error.__cause__, TimeoutError):
                raise MaxConnectionsError(
                    f"no free connection within {self.timeout} s "
                    f"(max_connections={self.max_connections})"
                ) from None
            raise


def pool_size(client: Any) -> int | None:
    """The size of ``client``'s connection pool (per node on a cluster), if it says."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        size = getattr(pool, "max_connections", None)
    else:
        nodes = getattr(client, "nodes_manager", None)
        size = getattr(nodes, "connection_kwargs", {}).get("max_connections")
    return size if isinstance(size, int) else None


__all__ = ["WaitingPool", "pool_size"]
