"""A SQLite database durably creates, and its -wal and -shm files, are owner-only."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from durably.clock import ManualClock
from durably.sqlite import SqliteStateStore, connect
from durably.stores.runs import RunRecord


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
@pytest.mark.usefixtures("umask_022")
async def test_a_new_database_and_its_wal_and_shm_are_readable_by_the_owner_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / "app.db"
    db = await connect(path)
    try:
        await SqliteStateStore(db, clock=ManualClock()).put_run(
            RunRecord(run_id="r", tenant="t", agent_name="a")
        )
        for name in ("app.db", "app.db-wal", "app.db-shm"):
            mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
            assert mode == 0o600, f"{name} is {oct(mode)}"
    finally:
        await db.close()
