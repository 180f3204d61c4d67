"""The claim's plan does not grow with the queue: PostgreSQL's estimate for it stays near its
real cost, so a large queue never tips it over ``jit_above_cost`` into a JIT compile."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durably.postgres import PostgresWorkQueue, StateTables
from durably.postgres import statements as sql_files
from durably.postgres.executor import database_for
from durably.postgres.queue import CLAIM_MOST
from tests.pg_service import Stores, close_pool, open_pool

pytestmark = pytest.mark.postgres

_FILL = """
INSERT INTO {work} (tenant, id, queue, payload, priority, state, enqueued_at, available_at)
SELECT 't', 'i' || g, 'default', '{{}}'::jsonb, 20, 'queued', g, g
FROM generate_series($1::integer, $2::integer) AS g
"""


async def _fill(pool: Any, tables: StateTables, first: int, last: int) -> None:
    """Items straight into the table, and their tenant into the rotation."""
    await _fetch(pool, _FILL.format(work=tables.names["work"]), first, last)
    rejoin = sql_files.render_all(sql_files.load("queue.sql"), tables.names)["rejoin"]
    await _fetch(pool, rejoin, "default")


async def _fetch(pool: Any, statement: str, *args: object) -> Any:
    async with database_for(pool).session(10.0) as session:
        return await session.fetch(statement, *args)


async def _generic_claim_cost(pool: Any, tables: StateTables) -> float:
    """The estimated total cost of the claim's generic plan (what a pooled connection runs
    after its first five claims)."""
    claim = sql_files.render_all(sql_files.load("queue.sql"), tables.names)["claim"]
    statement = claim.strip().rstrip(";")

    async def explain(session: Any) -> Any:
        await session.fetch("SET plan_cache_mode = force_generic_plan")
        try:
            types = "text, float8, text, float8, integer, boolean, integer"
            await session.fetch(f"PREPARE scale_claim ({types}) AS {statement}")
            rows = await session.fetch(
                "EXPLAIN (FORMAT JSON) EXECUTE scale_claim('default', 1e12, 'w', 30, 1, true, 8)"
            )
            await session.fetch("DEALLOCATE scale_claim")
        finally:
            await session.fetch("RESET plan_cache_mode")
        return rows

    async with database_for(pool).session(10.0) as session:
        rows = await explain(session)
    plan = rows[0][0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return float(plan[0]["Plan"]["Total Cost"])


async def test_the_claims_estimated_cost_does_not_grow_with_the_queue(
    pg_stores: Stores,
) -> None:
    if pg_stores.driver != "psycopg":
        pytest.skip("a property of the server's planner, not of the driver")
    tables = await pg_stores.tables()
    pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    await _fill(pg_stores.pool, tables, 1, 20_000)
    await _fetch(pg_stores.pool, f"ANALYZE {tables.names['work']}")
    small = await _generic_claim_cost(pg_stores.pool, tables)
    await _fill(pg_stores.pool, tables, 20_001, 80_000)
    await _fetch(pg_stores.pool, f"ANALYZE {tables.names['work']}")
    large = await _generic_claim_cost(pg_stores.pool, tables)
    # Four times the rows: the estimate may grow with the index depth, not with the rows
    # (it grew with them before, reaching jit_above_cost's 100,000 near a million rows).
    assert large < small * 1.5, (small, large)


async def test_one_claim_takes_at_most_claim_most_items(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    await _fill(pg_stores.pool, tables, 1, CLAIM_MOST + 5)
    batch = await queue.claim_many(worker="w", limit=CLAIM_MOST * 2)
    assert len(batch) == CLAIM_MOST
    rest = await queue.claim_many(worker="w", limit=CLAIM_MOST * 2)
    assert len(rest) == 5


async def test_a_pooled_connection_keeps_the_claims_generic_plan(
    postgres_dsn: str, pg_driver: str, pg_stores: Stores
) -> None:
    # From ~20k queued rows the plans made for one call's values used to look cheaper than
    # the generic plan, so every claim was planned again (~1 ms, more than it runs). On a
    # one-connection pool, after the plan cache's five trial runs, the claim must run the
    # generic plan.
    tables = await pg_stores.tables()
    await _fill(pg_stores.pool, tables, 1, 30_000)
    await _fetch(pg_stores.pool, f"ANALYZE {tables.names['work']}")
    await _fetch(pg_stores.pool, f"ANALYZE {tables.names['rota']}")
    pool = await open_pool(pg_driver, postgres_dsn, size=1)
    try:
        queue = PostgresWorkQueue(pool, tables=tables)
        claims = 12
        for n in range(claims):
            item = await queue.claim(worker=f"w{n}")
            assert item is not None
        rows = await _fetch(
            pool,
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE $1",
            f"%{tables.names['rota']}%'promote'%",
        )
        await queue.close()
    finally:
        await close_pool(pool)
    assert len(rows) == 1, rows
    generic, custom = rows[0]
    assert custom <= 5, (generic, custom)
    assert generic >= claims - 5, (generic, custom)
