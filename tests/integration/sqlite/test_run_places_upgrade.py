"""A SQLite file made before per-tenant listing places gains them when opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durably.clock import ManualClock
from durably.sqlite import SqliteStateStore, connect
from durably.stores.runs import RunRecord, StateQuery


async def test_a_version_2_file_gives_its_runs_places_and_cursors_carry_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    database = await connect(path)
    store = SqliteStateStore(database, clock=ManualClock())
    for run_id in ("a", "b", "c"):
        await store.put_run(RunRecord(run_id=run_id, tenant="t", agent_name="x"))
    old_cursor = (await store.list_runs(StateQuery(tenant="t", limit=1))).cursor
    await database.close()
    with sqlite3.connect(path) as raw:  # back to the version-2 layout
        raw.execute("DROP INDEX durably_runs_by_tenant_seq")
        raw.execute("ALTER TABLE durably_runs DROP COLUMN tenant_seq")
        raw.execute("DROP TABLE durably_run_seq")
        raw.execute("UPDATE durably_schema_version SET version = 2")
    database = await connect(path)
    try:
        store = SqliteStateStore(database, clock=ManualClock())
        await store.put_run(RunRecord(run_id="d", tenant="t", agent_name="x"))
        page = await store.list_runs(StateQuery(tenant="t"))
        assert [run.run_id for run in page.records] == ["a", "b", "c", "d"]
        after = await store.list_runs(StateQuery(tenant="t", cursor=old_cursor))
        assert [run.run_id for run in after.records] == ["b", "c", "d"]
    finally:
        await database.close()
