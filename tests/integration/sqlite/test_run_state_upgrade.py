"""A SQLite file of schema version 7 (run records of App workflows stored pending) opens
at version 8 with each such record in its workflow's run state, its totals moved too."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durably.sqlite import SCHEMA_VERSION, SqliteCheckpointer, connect
from durably.sqlite.state import SqliteStateStore
from tests.followed_before import AFTER, BEFORE, ended_workflows, states


async def test_a_version_7_files_app_runs_take_their_workflows_state_when_it_opens(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    database = await connect(str(path))
    try:
        await ended_workflows(SqliteCheckpointer(database), SqliteStateStore(database))
        assert await states(SqliteStateStore(database)) == AFTER
    finally:
        await database.close()
    with sqlite3.connect(path) as db:  # as version 7 left them: pending, no index
        db.execute("DROP INDEX durably_runs_following")
        db.execute(
            "UPDATE durably_runs SET state = 'pending', "
            "record = json_set(record, '$.state', 'pending')"
        )
        db.execute("UPDATE durably_schema_version SET version = 7")

    database = await connect(str(path))
    try:
        assert await states(SqliteStateStore(database)) == AFTER
    finally:
        await database.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM durably_schema_version").fetchone()[0] == 8
    assert SCHEMA_VERSION == 8


async def test_a_version_8_file_opened_again_moves_no_run(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    database = await connect(str(path))
    try:
        await ended_workflows(SqliteCheckpointer(database), SqliteStateStore(database))
    finally:
        await database.close()
    with sqlite3.connect(path) as db:  # a record set back by hand stays as it is
        db.execute(
            "UPDATE durably_runs SET state = 'pending', "
            "record = json_set(record, '$.state', 'pending')"
        )
    database = await connect(str(path))
    try:
        assert await states(SqliteStateStore(database)) == BEFORE
    finally:
        await database.close()
