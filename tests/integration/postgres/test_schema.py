"""Schema ownership: explicit migrate, verify that only reads and refuses, plain names."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from pydantic import SecretStr

from durably.clock import ManualClock
from durably.errors import ConfigurationError
from durably.postgres import (
    EXPECTED_SCHEMA,
    PostgresCheckpointer,
    PostgresStateStore,
    PostgresStoreSettings,
    PostgresWorkQueue,
    StateTables,
    migrate,
    verify,
)
from durably.postgres.executor import database_for
from durably.postgres.schema import split_statements
from durably.stores.runs import RunRecord, SessionRecord, StateQuery
from tests.pg_service import Stores, close_pool, open_pool

pytestmark = pytest.mark.postgres


async def fetch(pool: Any, statement: str, *args: Any) -> Any:
    async with database_for(pool).session(5.0) as session:
        return await session.fetch(statement, *args)


async def test_twenty_concurrent_migrations_all_succeed(pg_stores: Stores) -> None:
    tables = StateTables(schema=f"m_{uuid.uuid4().hex[:12]}")
    await asyncio.gather(*(migrate(pg_stores.pool, tables) for _ in range(20)))
    await verify(pg_stores.pool, tables)


async def test_verify_refuses_a_schema_version_it_was_not_written_for(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    await fetch(pg_stores.pool, f'UPDATE "{tables.schema}".durably_schema_version SET version = 99')
    with pytest.raises(ConfigurationError, match="version"):
        await verify(pg_stores.pool, tables)
    with pytest.raises(ConfigurationError):
        await PostgresStateStore.open(pg_stores.pool, tables=tables)


async def test_verify_refuses_connections_without_a_statement_timeout(
    postgres_dsn: str, pg_driver: str, pg_stores: Stores
) -> None:
    tables = await pg_stores.tables()
    pool = await open_pool(pg_driver, postgres_dsn, size=2, timeout_ms=0)
    try:
        with pytest.raises(ConfigurationError, match="statement_timeout"):
            await verify(pool, tables)
        with pytest.raises(ConfigurationError, match="statement_timeout"):
            await PostgresWorkQueue.open(pool, tables=tables)
    finally:
        await close_pool(pool)


async def test_nothing_applies_the_schema_implicitly(pg_stores: Stores) -> None:
    tables = StateTables(schema=f"absent_{uuid.uuid4().hex[:12]}")
    store = PostgresStateStore(pg_stores.pool, clock=ManualClock(), tables=tables)
    with pytest.raises(ConfigurationError, match="migrate"):
        await PostgresStateStore.open(pg_stores.pool, tables=tables)
    with pytest.raises(ConfigurationError, match="migrate"):
        await store.list_runs(__import__("durably.stores").stores.StateQuery(tenant="t"))
    rows = await fetch(
        pg_stores.pool, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", tables.schema
    )
    assert rows[0][0] == 0


async def test_the_published_schema_can_be_applied_by_another_tool(pg_stores: Stores) -> None:
    schema = f"own_{uuid.uuid4().hex[:12]}"
    async with database_for(pg_stores.pool).session(5.0) as session, session.transaction():
        await session.fetch(f'CREATE SCHEMA "{schema}"')
        await session.fetch(f'SET LOCAL search_path TO "{schema}"')
        for statement in split_statements(EXPECTED_SCHEMA):
            if statement.strip():
                await session.fetch(statement)
    await verify(pg_stores.pool, StateTables(schema=schema))


async def test_migrate_gives_an_earlier_layout_the_write_token_columns(pg_stores: Stores) -> None:
    # Databases made before runs and sessions carried a write token (same schema version)
    # gain the columns on the next migrate, and writes work again.
    tables = await pg_stores.tables()
    for table in (tables.runs, tables.sessions):
        await fetch(
            pg_stores.pool, f"ALTER TABLE {tables.qualified(table)} DROP COLUMN write_token"
        )
    store = PostgresStateStore(pg_stores.pool, clock=ManualClock(), tables=tables)
    with pytest.raises(ConfigurationError, match="migrate"):
        await store.put_run(RunRecord(run_id="r", tenant="t", agent_name="a"))
    await migrate(pg_stores.pool, tables)
    await verify(pg_stores.pool, tables)
    run = await store.put_run(RunRecord(run_id="r", tenant="t", agent_name="a"))
    session = await store.put_session(SessionRecord(session_id="s", tenant="t"))
    assert (run.version, session.version) == (1, 1)


async def test_migrate_gives_earlier_runs_their_places_and_cursors_carry_on(
    pg_stores: Stores,
) -> None:
    # Databases made before listings used each tenant's own places gain the column and the
    # counter table on the next migrate; earlier runs keep their order, and a cursor handed
    # out before the migrate (a creation sequence) still lists what follows it.
    tables = await pg_stores.tables()
    store = PostgresStateStore(pg_stores.pool, clock=ManualClock(), tables=tables)
    for run_id in ("a", "b", "c"):
        await store.put_run(RunRecord(run_id=run_id, tenant="t", agent_name="x"))
    old_cursor = (await store.list_runs(StateQuery(tenant="t", limit=1))).cursor
    runs = tables.qualified(tables.runs)
    await fetch(pg_stores.pool, f"DROP TABLE {tables.qualified(tables.run_seq)}")
    await fetch(pg_stores.pool, f"ALTER TABLE {runs} DROP COLUMN tenant_seq")
    await migrate(pg_stores.pool, tables)
    await verify(pg_stores.pool, tables)
    await store.put_run(RunRecord(run_id="d", tenant="t", agent_name="x"))
    page = await store.list_runs(StateQuery(tenant="t"))
    assert [run.run_id for run in page.records] == ["a", "b", "c", "d"]
    after = await store.list_runs(StateQuery(tenant="t", cursor=old_cursor))
    assert [run.run_id for run in after.records] == ["b", "c", "d"]


async def test_the_work_table_is_vacuumed_aggressively(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    rows = await fetch(
        pg_stores.pool,
        "SELECT reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = $2",
        tables.schema,
        tables.work,
    )
    options = set(rows[0][0])
    assert {"autovacuum_vacuum_scale_factor=0.01", "autovacuum_vacuum_cost_delay=0"} <= options


@pytest.mark.parametrize("name", ["Runs", "runs;drop", 'ru"ns', "", "1runs", "r" * 64, "ü"])
def test_table_names_must_be_plain_identifiers(name: str) -> None:
    with pytest.raises(ConfigurationError):
        StateTables(runs=name)
    with pytest.raises(ConfigurationError):
        StateTables(schema=name)


@pytest.mark.parametrize("name", ["runs\n", "runs\n\n", "runs\r"])
def test_a_table_name_with_a_trailing_line_break_is_refused(name: str) -> None:
    with pytest.raises(ConfigurationError):
        StateTables(runs=name)
    with pytest.raises(ConfigurationError):
        StateTables(schema=name)


def test_a_codec_that_does_not_render_json_is_refused_at_construction() -> None:
    class Base64Codec:
        def encode(self, value: object) -> str:
            return "b64"

        def decode(self, text: str) -> object:
            return text

    with pytest.raises(ConfigurationError, match="JSON"):
        PostgresCheckpointer(object(), codec=Base64Codec())


def test_the_dsn_never_appears_in_a_repr_or_a_dump() -> None:
    settings = PostgresStoreSettings(dsn=SecretStr("postgresql://u:hunter2@db/x"))
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(settings.model_dump())
    from_env = PostgresStoreSettings.from_env(
        {"DURABLY_POSTGRES_DSN": "postgresql://u:hunter2@db/x"}
    )
    assert from_env.dsn.get_secret_value().endswith("@db/x")
    assert "hunter2" not in repr(from_env)
