"""A SQLite file made before flow control (schema version 5) gains the gate columns, the
throttle table and the schedules' ticks when opened; its queued items are read back
ungated and new items take gates."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durably import WorkItem
from durably.sqlite import SCHEMA_VERSION, SqliteWorkQueue, connect
from durably.stores.work import flow_fields

_VERSION_5_WORK = """
CREATE TABLE durably_work (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, id TEXT NOT NULL,
    queue TEXT NOT NULL, payload TEXT NOT NULL, priority INTEGER NOT NULL, dedupe_key TEXT,
    attempts INTEGER NOT NULL, state TEXT NOT NULL, worker TEXT, enqueued_at REAL NOT NULL,
    available_at REAL NOT NULL, lease_expires_at REAL, first_claimed_at REAL,
    claimed_at REAL, failures TEXT NOT NULL, UNIQUE (tenant, id)
)
"""


async def test_a_version_5_file_gains_flow_control_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    database = await connect(path)
    await SqliteWorkQueue(database).enqueue(WorkItem(id="old", tenant="t"))
    await database.close()
    with sqlite3.connect(path) as raw:  # back to the version-5 layout, the item kept
        raw.execute("ALTER TABLE durably_work RENAME TO work_now")
        raw.execute(_VERSION_5_WORK)
        raw.execute(
            "INSERT INTO durably_work SELECT seq, tenant, id, queue, payload, priority,"
            " dedupe_key, attempts, state, worker, enqueued_at, available_at,"
            " lease_expires_at, first_claimed_at, claimed_at, failures FROM work_now"
        )
        raw.execute("DROP TABLE work_now")
        raw.execute("DROP TABLE durably_queue_throttles")
        raw.execute("DROP TABLE durably_schedule_ticks")
        raw.execute("UPDATE durably_schema_version SET version = 5")
    database = await connect(path)
    try:
        queue = SqliteWorkQueue(database)
        gate = flow_fields(concurrency_key="k", concurrency_limit=1)
        await queue.enqueue(WorkItem(id="new-1", tenant="t", **gate))
        await queue.enqueue(WorkItem(id="new-2", tenant="t", **gate))
        taken = await queue.claim_many(worker="w", limit=10)
        assert [(item.id, item.concurrency_key) for item in taken] == [
            ("old", None),
            ("new-1", "k"),
        ]
        assert await queue.advance_tick("s", 60.0) == (True, None)
        version = await database.transaction(
            lambda tx: tx.row("SELECT version FROM durably_schema_version")[0], write=False
        )
        assert version == SCHEMA_VERSION == 8
    finally:
        await database.close()
