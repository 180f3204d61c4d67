"""The scale table's PostgreSQL rows (see benchmarks.scale): each size in a fresh schema of
a scratch database, filled by one ``INSERT ... SELECT generate_series`` and analyzed."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from benchmarks import scale
from benchmarks.postgres import ADMIN_DSN, _dsn, _fetch, _floor_statements, _queue
from durably.postgres import StateTables, migrate
from durably.postgres import statements as sql_files

WARM = 8  # PostgreSQL settles on a generic plan after five runs of a prepared statement

FILL = """
INSERT INTO {work} (tenant, id, queue, payload, priority, state, enqueued_at, available_at)
SELECT 't' || (g % $1::integer), 'i' || g, 'default', '{{}}'::jsonb, 20, 'queued',
       $3::float8 + g * 1e-6, $3::float8 + g * 1e-6
FROM generate_series(1, $2::integer) AS g
"""
FLOOR_FILL = """
INSERT INTO {schema}.floor_jobs (payload)
SELECT '{{}}'::jsonb FROM generate_series(1, $1::integer)
"""


async def _pool(dsn: str) -> Any:
    """Two connections whose statement timeout allows a million-row fill."""
    from psycopg_pool import AsyncConnectionPool

    pool: Any = AsyncConnectionPool(
        dsn, min_size=2, max_size=2, kwargs={"options": "-c statement_timeout=600000"}, open=False
    )
    await pool.open(wait=True)
    return pool


async def _size(pool: Any, items: int, tenants: int) -> scale.Sample:
    schema = f"s_{uuid.uuid4().hex[:10]}"
    tables = StateTables(schema=schema)
    await migrate(pool, tables)
    sql = _floor_statements(schema)
    await _fetch(pool, sql["create"])
    base = time.time() - 3600
    await _fetch(pool, FILL.format(work=tables.names["work"]), tenants, items, base)
    rejoin = sql_files.render_all(sql_files.load("queue.sql"), tables.names)["rejoin"]
    await _fetch(pool, rejoin, "default")  # the rotation, as the enqueues would have made it
    await _fetch(pool, FLOOR_FILL.format(schema=schema), items)
    await _fetch(pool, f"ANALYZE {tables.names['work']}")
    await _fetch(pool, f"ANALYZE {tables.names['rota']}")
    await _fetch(pool, f"ANALYZE {schema}.floor_jobs")
    queue = _queue(pool, tables)

    async def floor_claim() -> object:
        rows = await _fetch(pool, sql["claim"], 1)
        return rows[0][0] if rows else None

    async def floor_complete(job: object) -> None:
        await _fetch(pool, sql["complete"], job)

    sample = await scale.timed(queue, floor_claim, floor_complete, warm=WARM)
    await _fetch(pool, f"DROP SCHEMA {schema} CASCADE")
    return sample


def table() -> list[list[scale.Row]]:
    import psycopg

    name = f"durably_scale_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    loop = asyncio.new_event_loop()
    try:
        pool = loop.run_until_complete(_pool(_dsn(name)))
        try:
            return scale.run(
                lambda items, tenants: loop.run_until_complete(_size(pool, items, tenants)),
                big=True,
            )
        finally:
            loop.run_until_complete(pool.close())
    finally:
        loop.close()
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
