"""A store written before workflows were counted per tenant migrates, keeps its workflows
readable and runnable, and counts only what starts after (never below zero)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from durably import App, Context, Limits, Topic, WorkflowLimitError
from durably.clock import ManualClock
from durably.postgres import StateTables
from durably.sqlite import SCHEMA_VERSION as SQLITE_VERSION
from durably.stores.admission import Admitting, TenantCounts
from tests.pg_service import create_database

NOTE = Topic("note", str)
TENANT = "acme"


def _sqlite_before(path: Path) -> str:
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE durably_workflow_admitted")
        raw.execute("DROP TABLE durably_workflow_tenant_counts")
        raw.execute("UPDATE durably_schema_version SET version = ?", (SQLITE_VERSION - 1,))
    with sqlite3.connect(path) as raw:
        return str(raw.execute("SELECT version FROM durably_schema_version").fetchone()[0])


def _postgres_before(dsn: str) -> str:
    names = StateTables().names
    with psycopg.connect(dsn, autocommit=True) as raw:
        raw.execute(f"DROP TABLE {names['workflow_admitted']}")
        raw.execute(f"DROP TABLE {names['workflow_tenant_counts']}")
        raw.execute(f"UPDATE {names['schema_version']} SET version = version - 1")
        row = raw.execute(f"SELECT version FROM {names['schema_version']}").fetchone()
        assert row is not None
        return str(row[0])


async def _counts(app: App) -> TenantCounts:
    checkpointer = (await app.stores()).checkpointer
    assert isinstance(checkpointer, Admitting)
    return await checkpointer.tenant_counts(TENANT)


def _register(app: App) -> Any:
    @app.workflow(name="upgrade-waits")
    async def waits(ctx: Context) -> str:
        return str(await ctx.recv(NOTE))

    return waits.start


@pytest.mark.parametrize("backing", ["sqlite", "postgres"])
async def test_a_store_from_before_the_counts_migrates_and_counts_only_new_starts(
    backing: str, tmp_path: Path
) -> None:
    if backing == "sqlite":
        path = tmp_path / "before.db"
        dsn = f"sqlite:///{path}"

        def roll_back() -> str:
            return _sqlite_before(path)
    else:
        dsn = create_database()

        def roll_back() -> str:
            return _postgres_before(dsn)

    async with App(dsn, clock=ManualClock()) as before:
        start = _register(before)
        old = await start(id="old", tenant=TENANT)
        await before.run_until_idle(advance=False)  # waiting for its message
    older_version = roll_back()

    async with App(dsn, clock=ManualClock(), limits=Limits(running_per_tenant=1)) as after:
        start = _register(after)
        assert await _counts(after) == TenantCounts()  # the old workflow is not counted
        handle = await after.get_handle(old.id, tenant=TENANT)
        assert (await handle.status()).kind == "upgrade-waits"
        new = await start(id="new", tenant=TENANT)
        assert await _counts(after) == TenantCounts(running=1, started=1)
        with pytest.raises(WorkflowLimitError):
            await start(id="newer", tenant=TENANT)
        await handle.send(NOTE, "done")
        await after.run_until_idle(advance=False)
        assert await handle.result(timeout=5) == "done"
        # The old workflow ended without being counted: the counts do not move.
        assert await _counts(after) == TenantCounts(running=1, started=1)
        await new.send(NOTE, "done too")
        await after.run_until_idle(advance=False)
        assert await _counts(after) == TenantCounts(running=0, started=1)
    assert int(older_version) >= 1
