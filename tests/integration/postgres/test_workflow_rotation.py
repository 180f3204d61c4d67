"""PostgreSQL's workflow rotation: no tenant is stranded by a `tidy` racing a make_ready
(scheduler.sql), concurrent producers and takers leave no workflow behind, a hand-out
costs no more at 10,000 tenants than at one, and a version-3 database's entries still hand
out once migrated."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import psycopg
import pytest

from durably.postgres import PostgresScheduler, StateTables, migrate, verify
from durably.postgres import statements as sql_files
from durably.postgres.executor import database_for, session_for
from durably.stores.workflows import DEFAULT_PRIORITY, DEFAULT_TENANT, Scheduler
from durably.testing.scheduler import take
from tests.handout_cost import check_handout_ratio
from tests.pg_service import Stores
from tests.written_before import check_written_before

pytestmark = pytest.mark.postgres


def _sql(tables: StateTables) -> dict[str, str]:
    return sql_files.render_all(sql_files.load("scheduler.sql"), tables.names)


async def _fetch(pool: Any, statement: str, *args: Any) -> Any:
    async with database_for(pool).session(5.0) as session:
        return await session.fetch(statement, *args)


async def _active(pool: Any, tables: StateTables, tenant: str) -> bool:
    rows = await _fetch(
        pool,
        f"SELECT active FROM {tables.names['workflow_tenants']} WHERE tenant = $1",
        tenant,
    )
    return bool(rows and rows[0][0])


async def _fresh(stores: Stores) -> tuple[StateTables, PostgresScheduler, dict[str, str]]:
    """Fresh tables, a scheduler over them and their statements."""
    tables = await stores.tables()
    scheduler = stores.track(PostgresScheduler(stores.pool, tables=tables))
    return tables, scheduler, _sql(tables)


async def _active_and_empty(scheduler: PostgresScheduler, tenant: str) -> None:
    """``tenant`` in the rotation with an empty line (its only workflow cancelled)."""
    await scheduler.make_ready("first", tenant=tenant)
    await scheduler.cancel("first")


async def test_a_make_ready_waits_for_a_tidy_holding_its_tenant_and_puts_it_back(
    pg_stores: Stores, postgres_dsn: str
) -> None:
    tables, scheduler, sql = await _fresh(pg_stores)
    await _active_and_empty(scheduler, "a")
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as tidier:
        session = session_for(tidier)
        assert await session.fetch(sql["tidy_lock"], "default", "a")  # the row is locked
        ready = asyncio.ensure_future(scheduler.make_ready("second", tenant="a"))
        await asyncio.sleep(0.3)
        assert not ready.done()  # waits for the tidy's row lock
        # The tidy finds the line empty (the make_ready's entry is not committed) and takes
        # the tenant out; the make_ready, let through, puts it back.
        await session.fetch(sql["tidy"], "default", "a")
        await tidier.commit()
        await asyncio.wait_for(ready, 10)
    assert await _active(pg_stores.pool, tables, "a")
    await take(scheduler, "second")


async def test_a_tidy_leaves_a_tenant_whose_make_ready_has_not_committed(
    pg_stores: Stores, postgres_dsn: str
) -> None:
    tables, scheduler, sql = await _fresh(pg_stores)
    await _active_and_empty(scheduler, "a")
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as writer:
        # A make_ready inside an open transaction: its entry is invisible to others, and
        # its tenant's row locked until the commit.
        await session_for(writer).fetch(
            sql["make_ready"],
            "default",
            "second",
            "a",
            DEFAULT_TENANT,
            "nobody",
            None,
            DEFAULT_PRIORITY,
        )
        assert await scheduler.next_ready(0) is None  # reads "a", cannot tidy it
        assert await _active(pg_stores.pool, tables, "a")
        await writer.commit()
    await take(scheduler, "second")


async def test_a_take_emptying_a_line_keeps_a_tenant_whose_make_ready_holds_its_row(
    pg_stores: Stores, postgres_dsn: str
) -> None:
    tables, scheduler, sql = await _fresh(pg_stores)
    await scheduler.make_ready("first", tenant="a")
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as writer:
        await session_for(writer).fetch(
            sql["make_ready"],
            "default",
            "second",
            "a",
            DEFAULT_TENANT,
            "nobody",
            None,
            DEFAULT_PRIORITY,
        )
        await take(scheduler, "first")  # its line looks empty; the row is held
        await writer.commit()
    assert await _active(pg_stores.pool, tables, "a")
    await take(scheduler, "second")


async def test_producers_racing_takers_that_drain_their_tenants_leave_no_workflow_behind(
    pg_stores: Stores, pg_driver: str
) -> None:
    if pg_driver == "asyncpg":
        pytest.skip("one driver is enough for the volume test; both run the suites")
    tables = await pg_stores.tables()
    scheduler = pg_stores.track(PostgresScheduler(pg_stores.pool, tables=tables))
    tenants = [f"t{n}" for n in range(6)]
    total = 400
    seen: list[str] = []
    producing = True
    chance = random.Random(11)

    async def producer(start: int) -> None:
        for n in range(start, total, 3):
            await scheduler.make_ready(f"w{n}", tenant=chance.choice(tenants))
            if n % 4 == 0:
                await asyncio.sleep(0)

    async def taker() -> None:
        idle = 0
        while idle < 4:
            delivery = await scheduler.next_ready(0.05)
            if delivery is None:
                idle += 0 if producing else 1
                continue
            idle = 0
            seen.append(delivery.workflow)
            await scheduler.done(delivery)

    takers = [asyncio.ensure_future(taker()) for _ in range(3)]
    await asyncio.gather(*(producer(start) for start in range(3)))
    producing = False
    await asyncio.wait_for(asyncio.gather(*takers), 60)
    while (delivery := await scheduler.next_ready(0)) is not None:  # nothing may be left
        seen.append(delivery.workflow)
        await scheduler.done(delivery)
    assert sorted(seen) == sorted(f"w{n}" for n in range(total))


async def test_a_hand_out_at_ten_thousand_tenants_costs_at_most_twice_one_tenant(
    pg_stores: Stores, pg_driver: str
) -> None:
    if pg_driver == "asyncpg":
        pytest.skip("one driver is enough for the timed bound")
    tables = await pg_stores.tables()

    sql = _sql(tables)

    async def make(namespace: str) -> Scheduler:
        scheduler = PostgresScheduler(pg_stores.pool, namespace=namespace, tables=tables)
        return pg_stores.track(scheduler)  # type: ignore[no-any-return]

    async def fill(scheduler: Scheduler, names: list[tuple[str, str]]) -> None:
        # The scheduler's own statement, all in one transaction (a commit each is slow).
        async with (
            database_for(pg_stores.pool).session(30.0) as session,
            session.transaction(),
        ):
            for workflow, tenant in names:
                await session.fetch(
                    sql["make_ready"],
                    scheduler.namespace,
                    workflow,
                    tenant,
                    DEFAULT_TENANT,
                    "-",
                    None,
                    DEFAULT_PRIORITY,
                )

    await check_handout_ratio(make, fill)


def _back_to_version_3(tables: StateTables) -> list[str]:
    """Statements that give a migrated schema the layout version 3 had."""
    names = tables.names
    return [
        f"DROP TABLE {names['workflow_tenants']}",
        f"DROP SEQUENCE {names['workflow_turn_seq']}",
        f"ALTER TABLE {names['workflow_queue']} DROP COLUMN tenant",
        f"CREATE INDEX {names['workflow_queue_name']}_ready ON {names['workflow_queue']} "
        "(namespace, visible_at, workflow) WHERE state = 'ready'",
        f"UPDATE {names['schema_version']} SET version = 3",
    ]


async def test_a_version_3_databases_entries_still_hand_out_once_migrated(
    pg_stores: Stores,
) -> None:
    pool = pg_stores.pool
    tables = await pg_stores.tables()
    for statement in _back_to_version_3(tables):
        await _fetch(pool, statement)
    queue = tables.names["workflow_queue"]
    await _fetch(  # as version 3 wrote them
        pool,
        f"INSERT INTO {queue} (namespace, workflow, state, visible_at, due, receipt, taken_at) "
        "VALUES ('default', 'queued-b', 'ready', now() - interval '2 s', NULL, NULL, NULL), "
        "('default', 'queued-a', 'ready', now() - interval '1 s', NULL, NULL, NULL), "
        "('default', 'lapsed', 'ready', now() - interval '5 s', NULL, 'old', "
        "now() - interval '35 s'), "
        "('default', 'held', 'ready', now() + interval '300 s', NULL, 'live', now()), "
        "('default', 'asleep', 'sleeping', now(), 50.0, NULL, NULL)",
    )
    with pytest.raises(Exception, match="version"):
        await verify(pool, tables)
    await migrate(pool, tables)
    await verify(pool, tables)
    indexes = await _fetch(
        pool,
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relkind = 'i'",
        tables.schema,
    )
    assert "durably_workflow_queue_ready" not in {str(row[0]) for row in indexes}
    scheduler = pg_stores.track(PostgresScheduler(pool, tables=tables))
    await check_written_before(scheduler, ["lapsed", "queued-b", "queued-a"])
