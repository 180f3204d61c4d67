"""A SQLite file of schema version 6 (no run totals) opens, counts the runs it holds once,
and keeps the totals with every run write from then on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durably.sqlite import connect
from durably.sqlite.state import SqliteStateStore
from durably.testing.state.totals import counted_after, stored_before


async def test_a_version_6_files_runs_are_counted_once_when_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    database = await connect(str(path))
    await stored_before(SqliteStateStore(database))
    await database.close()
    with sqlite3.connect(path) as db:
        for trigger in ("insert", "update", "delete"):
            db.execute(f"DROP TRIGGER durably_runs_totalled_{trigger}")
        db.execute("DROP TABLE durably_run_totals")
        db.execute("UPDATE durably_schema_version SET version = 6")

    database = await connect(str(path))
    try:
        await counted_after(SqliteStateStore(database))
    finally:
        await database.close()
