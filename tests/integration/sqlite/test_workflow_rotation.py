"""SQLite's workflow rotation (schema version 5): a hand-out reads the first row of an index
rather than sorting every ready entry or tenant, costs no more at 10,000 tenants than at
one, and a version-4 file's entries still hand out once it is opened."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from durably.sqlite import SCHEMA_VERSION, SqliteScheduler, connect
from durably.sqlite.connection import Transaction
from durably.sqlite.statements import load_statements
from durably.stores.work import WorkPriority
from durably.stores.workflows import Scheduler
from tests.handout_cost import check_handout_ratio
from tests.written_before import check_written_before

_SQL = load_statements("scheduler.sql")
PARAMS = {
    "namespace": "n",
    "tenant": "t",
    "workflow": "w",
    "now": 1.0,
    "at": 1.0,
    "lease": 30.0,
    "receipt": "r",
    "served": True,
    "head_at": 1.0,
    "head_workflow": "w",
    "most": 200,
    "until": 1.0,
    "idle": 0.0,
    "within": 1.0,
    "due": 1.0,
    "priority": 20,
}
HOT = (
    "take_first",
    "next_tenant",
    "settle_tenant",
    "place_tenant",
    "return_lapsed",
    "next_visible_at",
    "make_ready",
    "done",
    "cancel",
)


async def test_a_hand_out_reads_its_tenant_and_workflow_from_indexes_without_sorting(
    tmp_path: Path,
) -> None:
    await (await connect(tmp_path / "wf.db")).close()
    with sqlite3.connect(tmp_path / "wf.db") as raw:
        for name in HOT:
            plan = " | ".join(
                str(row[3]) for row in raw.execute(f"EXPLAIN QUERY PLAN {_SQL[name]}", PARAMS)
            )
            assert "TEMP B-TREE" not in plan, (name, plan)
            assert "SCAN durably_workflow_tenants" not in plan, (name, plan)
            assert "SCAN durably_workflow_queue" not in plan, (name, plan)


async def test_a_hand_out_at_ten_thousand_tenants_costs_at_most_twice_one_tenant(
    tmp_path: Path,
) -> None:
    database = await connect(tmp_path / "wf.db")
    try:

        async def make(namespace: str) -> Scheduler:
            return SqliteScheduler(database, namespace=namespace)

        async def fill(scheduler: Scheduler, names: list[tuple[str, str]]) -> None:
            assert isinstance(scheduler, SqliteScheduler)

            def each(tx: Transaction) -> None:
                for workflow, tenant in names:
                    scheduler.bound(tx).make_ready(workflow, tenant)

            await database.transaction(each)

        await check_handout_ratio(make, fill)
    finally:
        await database.close()


def _back_to_version_4(path: Path) -> None:
    """The layout a version-4 file has: entries without a tenant or a priority, one index
    of them all."""
    with sqlite3.connect(path) as raw:
        for index in ("lines", "ranks", "in_flight", "sleeping"):
            raw.execute(f"DROP INDEX durably_workflow_queue_{index}")
        raw.execute("DROP TABLE durably_workflow_tenants")
        raw.execute("ALTER TABLE durably_workflow_queue DROP COLUMN tenant")
        raw.execute("ALTER TABLE durably_workflow_queue DROP COLUMN priority")
        raw.execute(
            "CREATE INDEX durably_workflow_queue_visible "
            "ON durably_workflow_queue (namespace, state, visible_at, workflow)"
        )
        raw.execute("UPDATE durably_schema_version SET version = 4")


async def test_entries_of_a_version_4_file_still_hand_out_in_the_default_tenant(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    await (await connect(path)).close()
    _back_to_version_4(path)
    with sqlite3.connect(path) as raw:  # as version 4 wrote them
        now = time.time()
        rows = [
            ("queued-b", "ready", now - 2, None, None, None),
            ("queued-a", "ready", now - 1, None, None, None),
            ("lapsed", "ready", now - 5, None, "old-receipt", now - 35),
            ("held", "ready", now + 300, None, "live-receipt", now),
            ("asleep", "sleeping", now, 50.0, None, None),
        ]
        raw.executemany(
            "INSERT INTO durably_workflow_queue "
            "(namespace, workflow, state, visible_at, due, receipt, taken_at) "
            "VALUES ('default', ?, ?, ?, ?, ?, ?)",
            rows,
        )
    database = await connect(path)
    try:
        version = await database.transaction(
            lambda tx: tx.row("SELECT version FROM durably_schema_version")[0], write=False
        )
        assert version == SCHEMA_VERSION
        await check_written_before(SqliteScheduler(database), ["lapsed", "queued-b", "queued-a"])
    finally:
        await database.close()


async def test_a_version_7_file_gains_priorities_and_serves_the_highest_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v7.db"
    await (await connect(path)).close()
    with sqlite3.connect(path) as raw:  # the layout version 7 wrote: no priorities
        raw.execute("DROP INDEX durably_workflow_queue_ranks")
        raw.execute("ALTER TABLE durably_workflow_queue DROP COLUMN priority")
        raw.execute("ALTER TABLE durably_workflow_gated DROP COLUMN priority")
        raw.execute(
            "INSERT INTO durably_workflow_queue (namespace, workflow, state, visible_at) "
            "VALUES ('default', 'older', 'ready', ?)",
            (time.time() - 10,),
        )
        raw.execute("UPDATE durably_schema_version SET version = 7")
    database = await connect(path)
    try:
        scheduler = SqliteScheduler(database)
        await scheduler.make_ready("urgent", priority=int(WorkPriority.URGENT))
        order = [(await scheduler.next_ready(0)), (await scheduler.next_ready(0))]
        assert [d.workflow for d in order if d is not None] == ["urgent", "older"]
        gated = await database.transaction(
            lambda tx: [
                row[0]
                for row in tx.all(
                    "SELECT name FROM pragma_table_info(?)", ("durably_workflow_gated",)
                )
            ],
            write=False,
        )
        assert "priority" in gated
    finally:
        await database.close()
