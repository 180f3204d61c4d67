"""A database made by schema version 1 (workflow tables without the durably_ prefix) is
upgraded by `migrate`: its tables, indexes and sequence renamed, every row kept."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from durably.postgres import (
    SCHEMA_VERSION,
    PostgresCheckpointer,
    PostgresScheduler,
    PostgresWorkQueue,
    StateTables,
    migrate,
    statements,
    verify,
)
from durably.postgres.executor import database_for
from durably.stores.admission import TenantCaps, TenantCounts
from durably.stores.catalog import CatalogEntry
from durably.stores.status import WorkflowStatus
from durably.stores.work import WorkItem
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres

_VERSION_1 = (Path(__file__).parent / "fixtures" / "schema_version_1.sql").read_text()
_OLD_NAMES = {
    "workflow_checkpoint": "workflow_checkpoint",
    "workflow_claim": "workflow_claim",
    "workflow_queue": "workflow_queue",
    "workflow_status": "workflow_status",
    "workflow_seq": "workflow_seq",
}


async def fetch(pool: Any, statement: str, *args: Any) -> Any:
    async with database_for(pool).session(5.0) as session:
        return await session.fetch(statement, *args)


async def _version_1_database(pool: Any, schema: str) -> StateTables:
    """A fresh schema laid out as version 1 left it; its table names."""
    old = StateTables(schema=schema, **_OLD_NAMES)
    await fetch(pool, f'CREATE SCHEMA "{schema}"')
    script = statements.render(_VERSION_1, old.names)
    for statement in script.split(";\n"):
        if statement.strip() and not all(
            line.startswith("--") for line in statement.strip().splitlines()
        ):
            await fetch(pool, statement)
    return old


async def _relations(pool: Any, schema: str) -> set[str]:
    rows = await fetch(
        pool,
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1",
        schema,
    )
    return {str(row[0]) for row in rows}


async def test_migrate_renames_a_version_1_database_and_keeps_its_checkpoints(
    pg_stores: Stores,
) -> None:
    pool, schema = pg_stores.pool, f"v1_{uuid.uuid4().hex[:12]}"
    old = await _version_1_database(pool, schema)
    assert [
        tuple(r)
        for r in await fetch(pool, f'SELECT version FROM "{schema}".durably_schema_version')
    ] == [(1,)]
    before = PostgresCheckpointer(pool, tables=old)
    holder = await before.claim("wf-1", 60, 30)
    assert holder is not None
    await before.record(holder, "charge", {"amount": 42})
    await before.release(holder)
    await fetch(  # its status, as version 1 wrote it (today's writes also keep counts)
        pool,
        f"INSERT INTO {old.names['workflow_status']} (workflow, status, attempts, updated_at) "
        "VALUES ('wf-1', 'running', 0, now())",
    )
    await fetch(  # a ready entry, as version 1's scheduler wrote it
        pool,
        f"INSERT INTO {old.names['workflow_queue']} (namespace, workflow, state, visible_at) "
        "VALUES ('orders', 'wf-1', 'ready', now())",
    )

    tables = StateTables(schema=schema)
    await migrate(pool, tables)
    await migrate(pool, tables)  # a second run finds nothing to rename
    await verify(pool, tables)

    after = PostgresCheckpointer(pool, tables=tables)
    assert await after.load("wf-1") == {"charge": {"amount": 42}}
    status = await after.get_status("wf-1")
    assert status is not None
    assert status.status == "running"
    again = await after.claim("wf-1", 60, 30)
    assert again is not None
    assert again.token > holder.token
    scheduler = PostgresScheduler(pool, tables=tables, namespace="orders")
    delivery = await scheduler.next_ready(0)
    await scheduler.close()
    assert delivery is not None
    assert delivery.workflow == "wf-1"

    relations = await _relations(pool, schema)
    assert not {name for name in relations if name.startswith("workflow_")}
    assert {
        "durably_workflow_checkpoint",
        "durably_workflow_checkpoint_pkey",
        "durably_workflow_claim_pkey",
        "durably_workflow_queue_lines",
        "durably_workflow_queue_in_flight",
        "durably_workflow_tenants",
        "durably_workflow_queue_sleeping",
        "durably_workflow_status_by_status",
        "durably_workflow_status_by_age",
        "durably_workflow_seq",
        "durably_workflow_catalog",
        "durably_workflow_catalog_by_tenant",
        "durably_workflow_counts",
        "durably_throughput",
    } <= relations
    rows = await fetch(pool, f'SELECT version FROM "{schema}".durably_schema_version')
    assert [tuple(r) for r in rows] == [(SCHEMA_VERSION,)] == [(7,)]


async def test_a_fresh_database_has_only_prefixed_tables(pg_stores: Stores) -> None:
    schema = f"v2_{uuid.uuid4().hex[:12]}"
    await migrate(pg_stores.pool, StateTables(schema=schema))
    relations = await _relations(pg_stores.pool, schema)
    assert all(name.startswith("durably_") for name in relations), sorted(relations)


async def test_migrate_puts_a_version_2_databases_queued_tenants_into_the_rotation(
    pg_stores: Stores,
) -> None:
    # Version 2 is version 3 without the rotation tables: a queue with items of three
    # tenants, one served before (its turn in the turns table), one only delayed.
    pool = pg_stores.pool
    tables = await pg_stores.tables()
    names = tables.names
    queue = pg_stores.track(PostgresWorkQueue(pool, tables=tables))
    for tenant, item_id in (("a", "a0"), ("b", "b0"), ("b", "b1"), ("c", "c0"), ("d", "d0")):
        await queue.enqueue(WorkItem(id=item_id, tenant=tenant))
    await queue.enqueue(WorkItem(id="e0", tenant="e", available_at=4e9))
    await fetch(pool, f"DROP TABLE {names['rota']}, {names['waiting']}")
    await fetch(pool, f"UPDATE {names['schema_version']} SET version = 2")
    await fetch(
        pool, f"INSERT INTO {names['turns']} (queue, tenant, turn) VALUES ('default', 'a', 7)"
    )
    await fetch(pool, f"SELECT setval('{names['turn_seq']}', 100)")  # served up to turn 100
    with pytest.raises(Exception, match="version"):
        await verify(pool, tables)

    await migrate(pool, tables)
    await verify(pool, tables)
    rows = await fetch(pool, f"SELECT tenant, turn FROM {names['rota']} ORDER BY tenant")
    assert [tuple(row) for row in rows] == [("a", 7), ("b", 0), ("c", 0), ("d", 0), ("e", 0)]
    taken = []
    while (item := await queue.claim(worker="w")) is not None:
        await queue.complete(item.id, tenant=item.tenant, worker="w")
        taken.append(item.id)
    # Never-served tenants first by their oldest item, then a (turn 7), then b again.
    assert taken == ["b0", "c0", "d0", "a0", "b1"]
    assert (await queue.stats()).depth == 1  # e's delayed item, waiting apart


async def _as_version_5(pool: Any, names: dict[str, str]) -> None:
    """Lay the per-tenant and catalog counts out as version 5 kept them: one tenant counts
    row per tenant, and catalog entries moved and counted by triggers on status writes."""
    counts = names["workflow_tenant_counts"]
    await fetch(pool, f"DELETE FROM {counts} WHERE shard <> 0")
    pkey = f"{names['workflow_tenant_counts_name']}_pkey"
    await fetch(pool, f"ALTER TABLE {counts} DROP CONSTRAINT {pkey}")
    await fetch(pool, f"ALTER TABLE {counts} DROP COLUMN shard, ADD PRIMARY KEY (tenant)")
    await fetch(
        pool,
        f"CREATE FUNCTION {names['workflow_catalog_follow']}() RETURNS trigger "
        f"LANGUAGE plpgsql AS $$ BEGIN UPDATE {names['workflow_catalog']} "
        "SET status = NEW.status WHERE workflow = NEW.workflow AND status <> NEW.status; "
        "RETURN NULL; END $$",
    )
    await fetch(
        pool,
        f"CREATE TRIGGER {names['workflow_status_name']}_catalogued AFTER INSERT OR UPDATE "
        f"OF status ON {names['workflow_status']} FOR EACH ROW EXECUTE FUNCTION "
        f"{names['workflow_catalog_follow']}()",
    )
    await fetch(
        pool,
        f"CREATE OR REPLACE TRIGGER {names['workflow_catalog_name']}_counted AFTER INSERT "
        f"OR DELETE OR UPDATE OF status ON {names['workflow_catalog']} FOR EACH ROW "
        f"EXECUTE FUNCTION {names['workflow_catalog_count']}()",
    )
    await fetch(pool, f"UPDATE {names['schema_version']} SET version = 5")


async def test_migrate_from_version_5_keeps_the_tenant_counts_and_the_catalog_counts(
    pg_stores: Stores,
) -> None:
    pool = pg_stores.pool
    tables = await pg_stores.tables()
    names = tables.names
    before = PostgresCheckpointer(pool, tables=tables)
    ids = [f"wf-{n}" for n in range(6)]
    for workflow in ids:  # six running in tenant acme, one of them done below
        await before.admit(workflow, "start", {}, tenant="acme", caps=TenantCaps())
        await before.catalog(workflow, CatalogEntry("acme", "k", 1))
    await _as_version_5(pool, names)
    # Version 5's rows: 6 running, 6 started; the catalog's 6 pending on shards & 7.
    await fetch(pool, f"UPDATE {names['workflow_tenant_counts']} SET running = 6, started = 6")
    await fetch(pool, f"DELETE FROM {names['workflow_counts']}")
    await fetch(
        pool,
        f"INSERT INTO {names['workflow_counts']} (tenant, kind, status, shard, n) "
        "SELECT t, 'k', 'pending', hashtext(workflow) & 7, count(*) "
        f"FROM {names['workflow_catalog']}, unnest(ARRAY['acme', '']) AS t "
        "GROUP BY t, hashtext(workflow) & 7",
    )
    with pytest.raises(Exception, match="version"):
        await verify(pool, tables)

    await migrate(pool, tables)
    await migrate(pool, tables)  # a second run finds the shards there
    await verify(pool, tables)
    after = PostgresCheckpointer(pool, tables=tables)
    assert await after.tenant_counts("acme") == TenantCounts(6, 6)
    holder = await after.claim(ids[0], 60, 30)
    assert holder is not None
    await after.finish(holder, "end", 1)
    await after.admit("wf-new", "start", {}, tenant="acme", caps=TenantCaps(running=6))
    assert await after.tenant_counts("acme") == TenantCounts(6, 7)
    assert (
        await after.tally("acme")
        == await after.tally()
        == {
            ("k", WorkflowStatus.PENDING): 5,
            ("k", WorkflowStatus.COMPLETED): 1,
        }
    )
