"""The rotation under real concurrency: a claim's `tidy` takes a tenant out of the rotation
only when no enqueue of that tenant is in flight, so no queued item is ever left behind by
a tenant that is in neither the rotation nor the waiting set (queue.sql, `tidy`)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import psycopg
import pytest

from durably.clock import SystemClock
from durably.postgres import PostgresWorkQueue, StateTables
from durably.postgres import statements as sql_files
from durably.postgres.executor import database_for, session_for
from durably.stores.work import QueuePolicy, WorkItem
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres


def _sql(tables: StateTables) -> dict[str, str]:
    return sql_files.render_all(sql_files.load("queue.sql"), tables.names)


async def _in_rotation(dsn: str, tables: StateTables, tenant: str) -> bool:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
        cursor = await connection.execute(
            f"SELECT 1 FROM {tables.names['rota']} WHERE tenant = %s", (tenant,)
        )
        return await cursor.fetchone() is not None


async def _served_and_empty(queue: PostgresWorkQueue, tenant: str) -> None:
    """``tenant`` in the rotation with nothing queued (its only item claimed and completed)."""
    await queue.enqueue(WorkItem(id="first", tenant=tenant))
    item = await queue.claim(worker="w")
    assert item is not None
    await queue.complete(item.id, tenant=tenant, worker="w")


async def test_an_enqueue_waits_for_a_tidy_holding_its_tenant_and_puts_it_back(
    pg_stores: Stores, postgres_dsn: str
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    sql = _sql(tables)
    await _served_and_empty(queue, "a")
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as tidier:
        # The tidy's transaction holds the tenant's lock; an enqueue of it waits.
        session = session_for(tidier)
        locked = await session.fetch(sql["tidy_lock"], "default", ["a"])
        assert [tuple(row) for row in locked] == [("a",)]
        enqueue = asyncio.ensure_future(queue.enqueue(WorkItem(id="second", tenant="a")))
        await asyncio.sleep(0.3)
        assert not enqueue.done()
        # The tidy finds nothing queued (the enqueue has written nothing visible yet) and
        # takes the tenant out; the enqueue then finds the entry gone and puts it back.
        await session.fetch(sql["tidy"], "default", time.time(), ["a"])
        await tidier.commit()
        await asyncio.wait_for(enqueue, 10)
    assert await _in_rotation(postgres_dsn, tables, "a")
    item = await queue.claim(worker="w")
    assert item is not None
    assert item.id == "second"


async def test_a_tidy_leaves_a_tenant_whose_enqueue_has_not_committed(
    pg_stores: Stores, postgres_dsn: str
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    await _served_and_empty(queue, "a")
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as enqueuer:
        # The enqueue ran inside an open transaction: its item is invisible to others, and
        # its lock is held until the commit.
        await queue.bound(enqueuer).enqueue(WorkItem(id="second", tenant="a"))
        assert await queue.claim(worker="w") is None  # walks "a", finds nothing, tidies
        assert await _in_rotation(postgres_dsn, tables, "a")  # the tidy could not lock it
        await enqueuer.commit()
    item = await queue.claim(worker="w")
    assert item is not None
    assert item.id == "second"


async def test_enqueues_racing_claims_that_drain_their_tenants_leave_no_item_behind(
    pg_stores: Stores, pg_driver: str
) -> None:
    if pg_driver == "asyncpg":
        pytest.skip("one driver is enough for the volume test; both run the suites")
    tables = await pg_stores.tables()
    queue = pg_stores.track(
        PostgresWorkQueue(pg_stores.pool, clock=SystemClock(), policy=QueuePolicy(), tables=tables)
    )
    tenants = [f"t{n}" for n in range(6)]
    total = 600
    seen: set[str] = set()
    enqueuing = True
    chance = random.Random(7)

    async def enqueuer(start: int) -> None:
        for n in range(start, total, 4):
            delay = 0.05 if n % 7 == 0 else 0.0  # some wait apart, then are promoted
            await queue.enqueue(
                WorkItem(
                    id=f"i{n}", tenant=chance.choice(tenants), available_at=time.time() + delay
                )
            )
            if n % 5 == 0:
                await asyncio.sleep(0)

    async def claimer(name: str) -> None:
        idle_since: float | None = None
        while True:
            batch = await queue.claim_many(worker=name, limit=1 + len(name) % 3)
            for item in batch:
                seen.add(item.id)
                await queue.complete(item.id, tenant=item.tenant, worker=name)
            if batch or enqueuing:
                idle_since = None
                continue
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 0.5:
                return
            await asyncio.sleep(0.01)

    claimers = [asyncio.ensure_future(claimer(f"w{n}")) for n in range(4)]
    await asyncio.gather(*(enqueuer(start) for start in range(4)))
    enqueuing = False
    await asyncio.gather(*claimers)
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (0, 0)
    assert len(seen) == total


async def test_a_claim_walks_a_few_entries_not_every_tenant(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    for n in range(300):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n:03}"))
    sql = _sql(tables)
    statement = sql["claim"].strip().rstrip(";")
    plan = await _explain(pg_stores.pool, statement)
    walk = _node(plan, "walk")
    # The tenant it takes from and the 8 it reads beyond (for concurrent claims to fall
    # through to), of 300.
    assert walk is not None
    assert walk["Actual Rows"] <= 9, walk


async def _explain(pool: Any, statement: str) -> Any:
    async with database_for(pool).session(10.0) as session:
        types = "text, float8, text, float8, integer, boolean, integer"
        await session.fetch(f"PREPARE walk_claim ({types}) AS {statement}")
        rows = await session.fetch(
            "EXPLAIN (ANALYZE, FORMAT JSON) "
            "EXECUTE walk_claim('default', 1e12, 'w', 30, 1, true, 8)"
        )
        await session.fetch("DEALLOCATE walk_claim")
    plan = rows[0][0]
    return json.loads(plan) if isinstance(plan, str) else plan


def _node(plan: Any, cte: str) -> Any:
    """The plan node that produces the CTE ``cte``."""
    stack = [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        if node.get("Subplan Name") == f"CTE {cte}":
            return node
        stack.extend(node.get("Plans", []))
    return None
