"""What each Redis server (each master of a cluster) allows in clients, and has now."""

from __future__ import annotations

from typing import Any

from durably.redis.connection import pairs, text


async def server_connections(client: Any) -> list[tuple[str, int, int]]:
    """``(node, maxclients, connected_clients)`` for the server, or for each master of a
    cluster (each caps its own clients)."""
    primaries = getattr(client, "get_primaries", None)
    if primaries is None:
        return [("server", *await _limits(client, {}))]
    await client.initialize()
    found = []
    for node in primaries():
        found.append((f"{node.host}:{node.port}", *await _limits(client, {"target_nodes": node})))
    return found


async def _limits(client: Any, target: dict[str, Any]) -> tuple[int, int]:
    limit = pairs(await client.config_get("maxclients", **target))
    info = await client.info("clients", **target)
    return int(text(limit.get("maxclients", "0"))), int(info.get("connected_clients", 0))


__all__ = ["server_connections"]
