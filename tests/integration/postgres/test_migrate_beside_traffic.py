"""A process starting beside serving workers never stalls them: opening an App migrates,
and on a database already at this release's schema that takes no table lock.

Before, every open ran the idempotent schema script, whose ``ALTER TABLE ... IF NOT
EXISTS`` takes each table's exclusive lock even when there is nothing to add: a worker
starting beside others queued behind their writes and every write after it queued behind
the worker (seen as deadlocks with the serving workers' status writes, and as a pass
stalled past a short lease, its step then paid again by another worker)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from durably.app import App
from durably.postgres import StateTables
from durably.postgres.schema import SCHEMA_VERSION
from tests.pg_service import create_database

pytestmark = pytest.mark.postgres


async def test_opening_an_app_on_a_current_schema_waits_on_no_writer() -> None:
    dsn = create_database()
    async with App(dsn):  # migrated to this release's schema
        pass
    tables = StateTables()
    # A writer mid-transaction on the tables every pass writes, as a serving worker is.
    with psycopg.connect(dsn) as writer:
        for table in (tables.workflow_status, tables.workflow_checkpoint, tables.workflow_queue):
            writer.execute(f'LOCK TABLE "{table}" IN ROW EXCLUSIVE MODE')
        app = App(dsn)  # migrate=True: what a starting worker does
        try:
            await asyncio.wait_for(app.stores(), timeout=10)
        finally:
            await app.close()
        writer.rollback()


async def test_a_schema_behind_this_release_is_still_migrated() -> None:
    dsn = create_database()
    async with App(dsn):
        pass
    tables = StateTables()
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'DROP INDEX "{tables.workflow_queue}_ranks"')
        admin.execute(f'UPDATE "{tables.schema_version}" SET version = version - 1')
    async with App(dsn) as app:
        await app.stores()
    with psycopg.connect(dsn, autocommit=True) as admin:
        found = admin.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname = %s",
            (f"{tables.workflow_queue}_ranks",),
        ).fetchone()
        version = admin.execute(f'SELECT version FROM "{tables.schema_version}"').fetchone()
    assert found == (1,)
    assert version == (SCHEMA_VERSION,)
