"""Claims under real concurrency: SKIP LOCKED hands every item to exactly one worker."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from durably.clock import SystemClock
from durably.postgres import PostgresWorkQueue
from durably.stores.work import QueuePolicy, WorkItem
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres


async def test_ten_workers_claiming_at_once_take_ten_different_items(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    for tenant in ("a", "b"):
        for n in range(10):
            await queue.enqueue(WorkItem(id=f"i{n}", tenant=tenant))
    claims = await asyncio.gather(*(queue.claim(worker=f"w{n}") for n in range(10)))
    taken = [(item.tenant, item.id) for item in claims if item is not None]
    assert len(taken) == 10
    assert len(set(taken)) == 10


async def test_fifty_workers_take_two_thousand_items_each_exactly_once(
    pg_stores: Stores, pg_driver: str
) -> None:
    if pg_driver == "asyncpg":
        pytest.skip("one driver is enough for the volume test; both run the suites")
    tables = await pg_stores.tables()
    queue = pg_stores.track(
        PostgresWorkQueue(pg_stores.pool, clock=SystemClock(), policy=QueuePolicy(), tables=tables)
    )
    tenants = [f"tenant-{n}" for n in range(5)]
    enqueues = [queue.enqueue(WorkItem(id=f"item-{n}", tenant=tenants[n % 5])) for n in range(2000)]
    for start in range(0, 2000, 100):
        await asyncio.gather(*enqueues[start : start + 100])
    seen: Counter[tuple[str, str]] = Counter()

    async def worker(name: str) -> None:
        while True:
            batch = await queue.claim_many(worker=name, limit=8)
            if not batch:
                return
            for item in batch:
                seen[(item.tenant, item.id)] += 1
                await queue.complete(item.id, tenant=item.tenant, worker=name)

    await asyncio.gather(*(worker(f"w{n}") for n in range(50)))
    assert len(seen) == 2000
    assert set(seen.values()) == {1}
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (0, 0)
