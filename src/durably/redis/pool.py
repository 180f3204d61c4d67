"""The connection pool `RedisStoreSettings.client` builds: a caller waits for a free
connection, as on PostgreSQL, instead of being refused while the pool is busy."""

from __future__ import annotations

import inspect
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


def unknown_options(pool: Any) -> list[str]:
    """The options ``pool`` would hand its connections that their class does not take (a
    misspelt DSN query option): redis-py passes them on and fails only when it connects."""
    accepted: set[str] = set()
    for cls in pool.connection_class.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        parameters = inspect.signature(init).parameters.values()
        accepted.update(p.name for p in parameters if p.kind is not p.VAR_KEYWORD)
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break  # this class takes nothing beyond its own names
    return sorted(set(pool.connection_kwargs) - accepted)


__all__ = ["WaitingPool", "pool_size", "unknown_options"]
