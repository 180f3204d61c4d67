"""A PostgreSQL database of schema version 6 (run records of App workflows stored pending):
`migrate` moves each such record to its workflow's run state once, its totals too."""

from __future__ import annotations

from typing import Any

import pytest

from durably.postgres import PostgresCheckpointer, PostgresStateStore, migrate
from durably.postgres.executor import database_for
from tests.followed_before import AFTER, BEFORE, ended_workflows, states
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres


async def fetch(pool: Any, statement: str) -> Any:
    async with database_for(pool).session(5.0) as session:
        return await session.fetch(statement)


async def test_migrate_moves_app_runs_stored_pending_to_their_workflows_state(
    pg_stores: Stores,
) -> None:
    pool = pg_stores.pool
    tables = await pg_stores.tables()
    names = tables.names
    state = PostgresStateStore(pool, tables=tables)
    checkpointer = pg_stores.track(PostgresCheckpointer(pool, tables=tables))
    await ended_workflows(checkpointer, state)
    assert await states(state) == AFTER
    # As version 6 left them: pending, no index.
    await fetch(pool, f"DROP INDEX {tables.qualified(names['runs_name'] + '_following')}")
    await fetch(
        pool,
        f"UPDATE {names['runs']} SET state = 'pending', "
        "body = jsonb_set(body, ARRAY['state'], '\"pending\"')",
    )
    await fetch(pool, f"UPDATE {names['schema_version']} SET version = 6")
    assert await states(state) == BEFORE

    await migrate(pool, tables)
    assert await states(state) == AFTER
    assert [
        tuple(row) for row in await fetch(pool, f"SELECT version FROM {names['schema_version']}")
    ] == [(7,)]
    # A migrate of a version-7 database moves nothing: a record set back stays.
    await fetch(pool, f"UPDATE {names['runs']} SET state = 'pending'")
    await migrate(pool, tables)
    rows = await fetch(pool, f"SELECT count(*) FROM {names['runs']} WHERE state = 'pending'")
    assert rows[0][0] == 2
