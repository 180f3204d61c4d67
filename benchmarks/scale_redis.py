"""The scale table's Redis rows (see benchmarks.scale): each size in a fresh namespace of a
throwaway server (AOF on), filled through durably's own enqueue, 40 at a time (the floor
in bulk). The last column is the slowest script the server ran during the size's claims
and stats calls, read from its SLOWLOG."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from benchmarks import scale
from benchmarks.redis import Floor, fresh, server
from durably.clock import SystemClock
from durably.redis import RedisWorkQueue
from durably.stores.work import WorkItem

FILL_AT_ONCE = 40


async def _fill(queue: RedisWorkQueue, floor: Floor, items: int, tenants: int) -> None:
    for start in range(0, items, FILL_AT_ONCE):
        numbers = range(start, min(items, start + FILL_AT_ONCE))
        await asyncio.gather(
            *(queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n % tenants}")) for n in numbers)
        )
    now = time.time()
    for start in range(0, items, 1000):
        members = {f"i{n}": now for n in range(start, min(items, start + 1000))}
        await floor.client.zadd(floor.ready, members)


def _complete(floor: Floor) -> Callable[[object], Awaitable[object]]:
    async def complete(member: object) -> None:
        await floor.complete(str(member))

    return complete


async def _size(url: str, items: int, tenants: int) -> scale.Sample:
    client: Any = Redis.from_url(url)
    try:
        queue = RedisWorkQueue(client, clock=SystemClock(), key_prefix=fresh())
        floor = Floor(client, fresh())
        await _fill(queue, floor, items, tenants)
        await client.config_set("slowlog-log-slower-than", 0)
        await client.config_set("slowlog-max-len", 10_000)
        await client.slowlog_reset()
        ours, floor_ms, stats, _ = await scale.timed(queue, floor.claim, _complete(floor))
        slowest = max(
            (
                entry["duration"]
                for entry in await client.slowlog_get(10_000)
                if entry["command"].split(b" ")[0].upper() in (b"EVALSHA", b"EVAL")
            ),
            default=0,
        )
        await client.config_set("slowlog-log-slower-than", 10_000)
        await client.flushdb()
        return ours, floor_ms, stats, slowest / 1000.0
    finally:
        await client.aclose()


def table() -> list[list[scale.Row]]:
    with server() as url:
        return scale.run(lambda items, tenants: asyncio.run(_size(url, items, tenants)))
