"""SQLite's rotation index and size counters (schema version 4): a claim reads the first
row of an index rather than sorting every due item, the counters agree with a full count,
and a version-3 file keeps its queued items claimable in the same order."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durably import ManualClock, WorkItem
from durably.sqlite import SCHEMA_VERSION, SqliteWorkQueue, connect
from durably.sqlite.statements import load_statements
from durably.stores import QueuePolicy
from durably.testing.queue.order import drain

_SQL = load_statements("queue.sql")


async def test_a_claim_reads_its_tenant_and_item_from_indexes_without_sorting(
    tmp_path: Path,
) -> None:
    database = await connect(tmp_path / "work.db")
    await database.close()
    with sqlite3.connect(tmp_path / "work.db") as raw:
        for name in ("promote_due", "next_tenant", "oldest_of_priority", "send_tenant_to_back"):
            params = {
                "queue": "q",
                "tenant": "t",
                "now": 1.0,
                "head_at": 1.0,
                "head_seq": 1,
                "priority": 20,
                "passed": None,  # no tenant held back by its flow gates
            }
            plan = " | ".join(
                str(row[3]) for row in raw.execute(f"EXPLAIN QUERY PLAN {_SQL[name]}", params)
            )
            assert "TEMP B-TREE" not in plan, (name, plan)
            assert "SCAN durably_queue_tenants" not in plan, (name, plan)
            assert "SCAN durably_work" not in plan, (name, plan)


async def test_the_size_counters_agree_with_a_full_count(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    database = await connect(tmp_path / "work.db")
    try:
        queue = SqliteWorkQueue(
            database, clock=clock, policy=QueuePolicy(lease_seconds=5, max_attempts=2)
        )
        for n in range(30):
            await queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n % 4}", queue="q"))
        for n in range(12):
            item = await queue.claim(worker="w", queue="q")
            assert item is not None
            if n % 3 == 0:
                await queue.complete(item.id, tenant=item.tenant, worker="w")
            elif n % 3 == 1:
                await queue.fail(item.id, tenant=item.tenant, worker="w", error="x")
        clock.advance(6)
        await queue.reap()
        await queue.claim(worker="w2", queue="q")
        await queue.adopt(worker="w2")
        stats = await queue.stats(queue="q")
        counted = await database.transaction(
            lambda tx: {
                row[0]: row[1]
                for row in tx.all(
                    "SELECT state, COUNT(*) FROM durably_work WHERE queue = 'q' GROUP BY state"
                )
            },
            write=False,
        )
        assert (stats.depth, stats.claimed, stats.dead_lettered) == (
            counted.get("queued", 0),
            counted.get("claimed", 0),
            counted.get("dead_lettered", 0),
        )
        assert stats.depth > 0
    finally:
        await database.close()


def _back_to_version_3(path: Path) -> None:
    """The layout a version-3 file has: turns in durably_work_turns, no index, no sizes."""
    with sqlite3.connect(path) as raw:
        raw.execute(
            "CREATE TABLE durably_work_turns (queue TEXT NOT NULL, tenant TEXT NOT NULL, "
            "turn INTEGER NOT NULL, PRIMARY KEY (queue, tenant))"
        )
        raw.execute(
            "INSERT INTO durably_work_turns SELECT queue, tenant, turn "
            "FROM durably_queue_tenants WHERE turn > 0"
        )
        raw.execute("DROP TABLE durably_queue_tenants")
        raw.execute("DROP TABLE durably_queue_sizes")
        for kind in ("insert", "delete", "update"):
            raw.execute(f"DROP TRIGGER durably_work_sized_{kind}")
        raw.execute("UPDATE durably_schema_version SET version = 3")


async def test_a_version_3_file_keeps_its_queued_items_in_the_same_order(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1000.0)
    path = tmp_path / "old.db"
    database = await connect(path)
    queue = SqliteWorkQueue(database, clock=clock)
    for tenant, item_id in (("a", "a0"), ("b", "b0"), ("a", "a1"), ("b", "b1"), ("c", "c0")):
        await queue.enqueue(WorkItem(id=item_id, tenant=tenant, queue="q"))
        clock.advance(1)
    await queue.enqueue(WorkItem(id="d0", tenant="d", queue="q", available_at=1100.0))
    assert await drain(queue, "q", 1) == [("a", "a0")]
    await database.close()
    _back_to_version_3(path)
    database = await connect(path)
    try:
        version = await database.transaction(
            lambda tx: tx.row("SELECT version FROM durably_schema_version")[0], write=False
        )
        assert version == SCHEMA_VERSION
        queue = SqliteWorkQueue(database, clock=clock)
        assert (await queue.stats(queue="q")).depth == 5
        taken = await drain(queue, "q", 4)
        assert taken == [("b", "b0"), ("c", "c0"), ("a", "a1"), ("b", "b1")]
        assert await queue.claim(worker="w", queue="q") is None
        clock.advance(100)
        assert await drain(queue, "q", 1) == [("d", "d0")]
    finally:
        await database.close()


async def test_a_version_5_file_gains_kept_dedupe_keys_and_keeps_its_items(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1000.0)
    path = tmp_path / "v5.db"
    database = await connect(path)
    queue = SqliteWorkQueue(database, clock=clock)
    await queue.enqueue(WorkItem(id="a0", tenant="a", queue="q", dedupe_key="k"))
    await database.close()
    with sqlite3.connect(path) as raw:  # the layout a version-5 file has
        raw.execute("DROP TABLE durably_dedupe_keys")
        raw.execute("UPDATE durably_schema_version SET version = 5")
    database = await connect(path)
    try:
        version = await database.transaction(
            lambda tx: tx.row("SELECT version FROM durably_schema_version")[0], write=False
        )
        assert version == SCHEMA_VERSION == 8
        queue = SqliteWorkQueue(database, clock=clock)
        held = await queue.enqueue(WorkItem(id="a1", tenant="a", queue="q", dedupe_key="k"))
        assert held.id == "a0"  # the old live item still holds its key
        taken = await queue.claim(worker="w", queue="q")
        assert taken is not None
        await queue.complete("a0", tenant="a", worker="w")
        kept = await queue.enqueue(
            WorkItem(id="a2", tenant="a", queue="q", dedupe_key="k2"), dedupe_ttl=60
        )
        assert kept.id == "a2"
    finally:
        await database.close()
