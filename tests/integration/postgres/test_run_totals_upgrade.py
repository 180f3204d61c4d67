"""A PostgreSQL database whose runs were stored before the run totals existed: `migrate`
counts them once, and the trigger keeps the totals from then on."""

from __future__ import annotations

from typing import Any

import pytest

from durably.postgres import PostgresStateStore, migrate
from durably.postgres.executor import database_for
from durably.testing.state.totals import counted_after, stored_before
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres


async def fetch(pool: Any, statement: str) -> Any:
    async with database_for(pool).session(5.0) as session:
        return await session.fetch(statement)


async def test_migrate_counts_runs_stored_before_the_totals_once(pg_stores: Stores) -> None:
    pool = pg_stores.pool
    tables = await pg_stores.tables()
    names = tables.names
    store = PostgresStateStore(pool, tables=tables)
    await stored_before(store)
    await fetch(pool, f"DROP TRIGGER {names['runs_name']}_totalled ON {names['runs']}")
    await fetch(pool, f"DROP TABLE {names['run_totals']}")

    await migrate(pool, tables)
    await migrate(pool, tables)  # a second migrate counts nothing again
    await counted_after(store)
