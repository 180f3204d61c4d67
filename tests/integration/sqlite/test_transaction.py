"""A run and the work it queues commit together, or not at all."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from durably.clock import ManualClock
from durably.errors import ConfigurationError, StateConflictError
from durably.sqlite import (
    Database,
    SqliteCheckpointer,
    SqliteDurable,
    SqliteScheduler,
    SqliteStateStore,
    SqliteWorkQueue,
    Transaction,
    connect,
)
from durably.stores.runs import RunRecord, RunState
from durably.stores.work import WorkItem


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await connect(tmp_path / "tx.db")
    yield database
    await database.close()


def _run(version: int = 0) -> RunRecord:
    return RunRecord(
        run_id="run-1", tenant="acme", agent_name="agent", state=RunState.RUNNING, version=version
    )


async def test_a_run_and_the_work_it_queues_commit_in_one_transaction(db: Database) -> None:
    clock = ManualClock()
    state, queue = SqliteStateStore(db, clock=clock), SqliteWorkQueue(db, clock=clock)

    def start(tx: Transaction) -> tuple[RunRecord, WorkItem]:
        run = state.bound(tx).put_run(_run())
        item = queue.bound(tx).enqueue(
            WorkItem(id="step-1", tenant="acme", payload={"run": run.run_id})
        )
        return run, item

    run, item = await db.transaction(start)
    assert run.version == 1
    assert await state.get_run(run.key) == run
    claimed = await queue.claim(worker="w")
    assert claimed is not None
    assert (claimed.id, claimed.payload) == (item.id, {"run": "run-1"})


async def test_a_failure_after_both_writes_leaves_neither(db: Database) -> None:
    state, queue = SqliteStateStore(db), SqliteWorkQueue(db)

    def start_then_fail(tx: Transaction) -> None:
        state.bound(tx).put_run(_run())
        queue.bound(tx).enqueue(WorkItem(id="step-1", tenant="acme"))
        raise RuntimeError("the process decided otherwise")

    with pytest.raises(RuntimeError, match="decided otherwise"):
        await db.transaction(start_then_fail)
    assert await state.get_run(_run().key) is None
    assert await queue.claim(worker="w") is None
    assert (await queue.stats()).depth == 0


async def test_a_conflicting_run_write_takes_its_queued_work_back(db: Database) -> None:
    state, queue = SqliteStateStore(db), SqliteWorkQueue(db)
    await state.put_run(_run())

    def stale_update(tx: Transaction) -> None:
        queue.bound(tx).enqueue(WorkItem(id="step-2", tenant="acme"))
        state.bound(tx).put_run(_run(version=0))  # read before the first write: conflicts

    with pytest.raises(StateConflictError):
        await db.transaction(stale_update)
    assert (await queue.stats()).depth == 0


async def test_a_durable_refuses_stores_on_different_databases(
    db: Database, tmp_path: Path
) -> None:
    other = await connect(tmp_path / "other.db")
    try:
        with pytest.raises(ConfigurationError, match="same Database"):
            SqliteDurable(SqliteCheckpointer(db), SqliteScheduler(other, lease=5.0))
    finally:
        await other.close()


async def test_a_delivered_message_and_its_wakeup_land_together(db: Database) -> None:
    durable = SqliteDurable(SqliteCheckpointer(db), SqliteScheduler(db, lease=5.0))
    entry = await durable.deliver("wf {1}", {"text": "hello"})
    delivery = await durable.scheduler.next_ready(0)
    assert delivery is not None
    assert delivery.workflow == "wf {1}"
    assert await durable.checkpointer.load("wf {1}") == {entry.key: {"text": "hello"}}
    assert await durable.delete("wf {1}") == 1
    assert await durable.scheduler.next_ready(0) is None
