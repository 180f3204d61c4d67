"""`stats()` reads a bounded number of rows at any size: exact below the cap, the planner's
estimate (never below the cap) above it, and an oldest age read from one index entry."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from durably.postgres import PostgresWorkQueue, StateTables, migrate
from durably.postgres import statements as sql_files
from durably.postgres.executor import database_for
from durably.postgres.queue import STATS_EXACT_UP_TO
from durably.stores.work import WorkItem
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres

_FILL = """
INSERT INTO {work} (tenant, id, queue, payload, priority, state, enqueued_at, available_at,
                    lease_expires_at)
SELECT 't' || (g % 1000), 'i' || g, 'default', '{{}}'::jsonb, 20, $3::text, $4::float8 + g,
       $4::float8 + g, CASE WHEN $3::text = 'claimed' THEN 1e12 END
FROM generate_series($1::integer, $2::integer) AS g
"""


async def _fetch(pool: Any, statement: str, *args: object) -> Any:
    async with database_for(pool).session(30.0) as session:
        return await session.fetch(statement, *args)


async def _fill(pool: Any, tables: StateTables, first: int, last: int, state: str) -> None:
    base = time.time() - 3600
    await _fetch(pool, _FILL.format(work=tables.names["work"]), first, last, state, base)


async def test_stats_are_exact_below_the_cap(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    below = STATS_EXACT_UP_TO - 1
    await _fill(pg_stores.pool, tables, 1, below, "queued")
    await _fill(pg_stores.pool, tables, below + 1, 2 * below, "claimed")
    await _fill(pg_stores.pool, tables, 2 * below + 1, 3 * below, "dead_lettered")
    stats = await queue.stats()
    assert (stats.depth, stats.claimed, stats.dead_lettered) == (below, below, below)
    assert 3500 < stats.oldest_age_seconds < 3700


async def test_stats_above_the_cap_estimate_and_never_report_less_than_the_cap(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    await _fill(pg_stores.pool, tables, 1, 50_000, "queued")
    # Before the table's statistics exist, the figure is still at least the cap.
    assert (await queue.stats()).depth >= STATS_EXACT_UP_TO
    await _fetch(pg_stores.pool, f"ANALYZE {tables.names['work']}")
    assert 40_000 <= (await queue.stats()).depth <= 60_000


async def test_stats_at_200k_items_read_a_bounded_number_of_pages(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    await _fill(pg_stores.pool, tables, 1, 200_000, "queued")
    await _fetch(pg_stores.pool, f"VACUUM ANALYZE {tables.names['work']}")
    stats = sql_files.render_all(sql_files.load("queue.sql"), tables.names)["stats"]
    statement = stats.strip().rstrip(";")
    async with database_for(pg_stores.pool).session(30.0) as session:
        await session.fetch(f"PREPARE stats_probe (text, float8, integer) AS {statement}")
        rows = await session.fetch(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
            f"EXECUTE stats_probe('default', 1e12, {STATS_EXACT_UP_TO})"
        )
        await session.fetch("DEALLOCATE stats_probe")
    plan = rows[0][0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    top = plan[0]["Plan"]
    pages = top["Shared Hit Blocks"] + top["Shared Read Blocks"]
    # Counting all 200k rows reads the whole index (over 500 pages); the capped read a few.
    assert pages < 100, pages


async def test_migrate_adds_the_oldest_index_to_an_earlier_layout(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    index = f"{tables.schema}.{tables.names['work_name']}_oldest"
    await _fetch(pg_stores.pool, f"DROP INDEX {index}")
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    await queue.enqueue(WorkItem(id="a", tenant="t"))
    assert (await queue.stats()).depth == 1  # still answers, by a slower read
    await migrate(pg_stores.pool, tables)
    found = await _fetch(pg_stores.pool, "SELECT to_regclass($1::text) IS NOT NULL", index)
    assert found[0][0]
    assert (await queue.stats()).depth == 1
