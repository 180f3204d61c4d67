"""`preflight`: refuse a Redis server that would lose state. Reads only, never sets."""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisClusterException, RedisError

from durably.errors import ConfigurationError

REFUSED_EVICTION = ("volatile-ttl",)


async def _config(client: Any, name: str) -> list[str]:
    """``CONFIG GET name`` on every node the client talks to (one for standalone)."""
    nodes = getattr(client, "get_primaries", None)
    try:
        if nodes is None:
            reply = await client.config_get(name)
            return [_text(reply.get(name, ""))]
        # A cluster client knows its primaries only once it has read the cluster's layout;
        # a fresh one (as `RedisStoreSettings.client` builds) would list none.
        await client.initialize()
        values = []
        for node in nodes():
            reply = await client.config_get(name, target_nodes=node)
            values.append(_text(reply.get(name, "")))
        return values
    except (RedisError, RedisClusterException) as error:
        raise ConfigurationError(
            f"cannot read Redis setting {name!r} ({type(error).__name__}); the server must "
            "allow CONFIG GET, or pass durable=False (?durable=false in a DSN) to skip the "
            "checks"
        ) from None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def preflight(client: Any, *, durable: bool = True) -> None:
    """Refuse a server that evicts durable keys or keeps nothing across a restart.

    Raises `ConfigurationError` for ``maxmemory-policy`` ``allkeys-*`` or ``volatile-ttl``,
    and for persistence off (``appendonly no`` and an empty ``save``). With
    ``durable=False`` it makes no call at all.
    """
    if not durable:
        return
    for policy in await _config(client, "maxmemory-policy"):
        if policy.startswith("allkeys-") or policy in REFUSED_EVICTION:
            raise ConfigurationError(
                f"Redis maxmemory-policy is {policy!r}: eviction would drop runs and work "
                "mid-flight; use noeviction (or volatile-lru/lfu/random)"
            )
    appendonly = await _config(client, "appendonly")
    save = await _config(client, "save")
    for aof, points in zip(appendonly, save, strict=True):
        if aof.strip().lower() == "no" and not points.strip():
            raise ConfigurationError(
                "Redis persistence is off (appendonly no, no save points): a restart would "
                "lose every record; enable AOF or RDB, or pass durable=False (?durable=false "
                "in a DSN)"
            )


__all__ = ["preflight"]
