"""What a flow gate costs a claim: one process claims and completes ``ITEMS`` items one at a
time, first items under no gate, then the same items each under a per-key concurrency
limit (``KEYS`` keys, limit 1), on memory, SQLite, PostgreSQL and Redis. The row is the
ratio of the gated to the plain claim+complete time (the promise: at most 1.5x).

Each side runs ``ROUNDS`` times, interleaved; the median ratio is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from durably.clock import SystemClock
from durably.memory.queue import MemoryWorkQueue
from durably.sqlite import SqliteWorkQueue, connect
from durably.stores.work import WorkItem, flow_fields

ITEMS = 400
KEYS = 50
ROUNDS = 3
TENANTS = 4

Opener = Callable[[], contextlib.AbstractAsyncContextManager[Any]]


def _items(gated: bool) -> list[WorkItem]:
    items = []
    for n in range(ITEMS):
        gate = flow_fields(concurrency_key=f"k{n % KEYS}", concurrency_limit=1) if gated else {}
        items.append(WorkItem(id=f"i{n}", tenant=f"t{n % TENANTS}", **gate))
    return items


async def _claims_per_second(queue: Any, gated: bool) -> float:
    for item in _items(gated):
        await queue.enqueue(item)
    started = time.perf_counter()
    done = 0
    while (item := await queue.claim(worker="bench")) is not None:
        await queue.complete(item.id, tenant=item.tenant, worker="bench")
        done += 1
    assert done == ITEMS, done
    return done / (time.perf_counter() - started)


@contextlib.asynccontextmanager
async def _memory() -> AsyncIterator[Any]:
    yield MemoryWorkQueue(SystemClock())


@contextlib.asynccontextmanager
async def _sqlite() -> AsyncIterator[Any]:
    with tempfile.TemporaryDirectory() as folder:
        db = await connect(Path(folder) / "flow.db")
        try:
            yield SqliteWorkQueue(db)
        finally:
            await db.close()


@contextlib.asynccontextmanager
async def _postgres() -> AsyncIterator[Any]:
    from benchmarks.postgres import ADMIN_DSN, _pool
    from durably.postgres import PostgresWorkQueue, StateTables, migrate

    pool = await _pool(ADMIN_DSN, size=2)
    tables = StateTables(schema=f"bench_flow_{uuid.uuid4().hex[:8]}")
    try:
        await migrate(pool, tables)
        queue = PostgresWorkQueue(pool, clock=SystemClock(), tables=tables)
        try:
            yield queue
        finally:
            await queue.close()
    finally:
        async with pool.connection() as connection:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{tables.schema}" CASCADE')
        await pool.close()


def _redis(url: str) -> Opener:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[Any]:
        from redis.asyncio import Redis

        from benchmarks.redis import fresh
        from durably.redis import RedisWorkQueue

        client = Redis.from_url(url)
        name = fresh()
        try:
            yield RedisWorkQueue(client, clock=SystemClock(), key_prefix=name)
        finally:
            async for key in client.scan_iter(match=f"{name}:*", count=500):
                await client.unlink(key)
            await client.aclose()

    return opened


async def _ratio(open_queue: Opener) -> tuple[float, float, float]:
    ratios, plain_rates, gated_rates = [], [], []
    for _ in range(ROUNDS):
        async with open_queue() as queue:
            plain = await _claims_per_second(queue, gated=False)
        async with open_queue() as queue:
            gated = await _claims_per_second(queue, gated=True)
        plain_rates.append(plain)
        gated_rates.append(gated)
        ratios.append(plain / gated)
    return (
        statistics.median(plain_rates),
        statistics.median(gated_rates),
        statistics.median(ratios),
    )


async def _run() -> None:
    from benchmarks.redis import server

    print(f"claim+complete one at a time, {ITEMS} items; gated: {KEYS} keys, limit 1 each")
    print(f"{'backing':<12}{'plain/s':>10}{'gated/s':>10}{'gated cost':>12}")
    backings: list[tuple[str, Opener]] = [
        ("memory", _memory),
        ("sqlite", _sqlite),
        ("postgres", _postgres),
    ]
    with server() as url:
        backings.append(("redis", _redis(url)))
        for name, opener in backings:
            try:
                plain, gated, ratio = await _ratio(opener)
            except OSError as exc:  # a server that is not there: the others still run
                print(f"{name:<12}(unavailable: {exc})")
                continue
            print(f"{name:<12}{plain:>10.0f}{gated:>10.0f}{ratio:>11.2f}x", flush=True)


def main() -> None:
    asyncio.run(_run())


if __name__ == "__main__":
    main()
