"""Cancelled callers, closing, and failures after the transaction is gone."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from durably.errors import StateConflictError
from durably.sqlite import (
    Database,
    SqliteCheckpointer,
    SqliteStateStore,
    Transaction,
    TransactionEndedError,
    connect,
)
from durably.stores.runs import RunRecord

WAIT = 10.0  # generous bound on thread hand-offs; never reached when things work


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await connect(tmp_path / "cancel.db")
    yield database
    await database.close()


class Gate:
    """Holds a job on the database thread until the test lets it go."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def hold(self) -> None:
        self.entered.set()
        assert self.release.wait(WAIT), "the test never released the job"

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, WAIT)


def _counter(cursor: sqlite3.Cursor) -> int:
    cursor.execute("CREATE TABLE IF NOT EXISTS hits (n INTEGER)")
    row = cursor.execute("SELECT COUNT(*) FROM hits").fetchone()
    return int(row[0])


async def test_a_cancelled_caller_never_hands_an_open_transaction_to_the_next(
    db: Database,
) -> None:
    checkpointer = SqliteCheckpointer(db)
    holder = await checkpointer.claim("wf", 30.0, 30.0)
    assert holder is not None
    gate = Gate()

    def slow_effect(cursor: sqlite3.Cursor) -> object:
        cursor.execute("CREATE TABLE hits (n INTEGER)")
        cursor.execute("INSERT INTO hits (n) VALUES (1)")
        gate.hold()  # the caller is cancelled while the transaction is open
        return "paid"

    caller = asyncio.create_task(checkpointer.transact(holder, "step", slow_effect))
    await gate.wait_entered()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    gate.release.set()

    def next_caller(tx: Transaction) -> tuple[bool, int]:
        # BEGIN IMMEDIATE ran for this job, so nothing was left open before it.
        return tx.cursor().connection.in_transaction, _counter(tx.cursor())

    in_transaction, hits = await db.transaction(next_caller)
    assert in_transaction
    assert hits == 1, "the cancelled job ran to its end: effect committed once"
    assert await checkpointer.load("wf") == {"step": "paid"}, "effect and record together"


async def test_cancelled_concurrent_creates_leave_exactly_one_whole_record(db: Database) -> None:
    store = SqliteStateStore(db)
    run = RunRecord(run_id="r", tenant="t", agent_name="a")
    writers = [asyncio.create_task(store.put_run(run)) for _ in range(20)]
    await asyncio.sleep(0)
    for writer in writers[::2]:
        writer.cancel()
    results = await asyncio.gather(*writers, return_exceptions=True)
    allowed = (RunRecord, StateConflictError, asyncio.CancelledError)
    assert all(isinstance(result, allowed) for result in results)
    assert sum(isinstance(result, RunRecord) for result in results) <= 1
    stored = await store.get_run(run.key)
    assert stored is not None
    assert stored.version == 1
    assert (await store.put_run(stored)).version == 2


async def test_a_caller_cancelled_before_its_turn_writes_nothing(db: Database) -> None:
    gate = Gate()
    busy = asyncio.create_task(db.transaction(lambda tx: gate.hold()))
    await gate.wait_entered()
    store = SqliteStateStore(db)
    run = RunRecord(run_id="r", tenant="t", agent_name="a")
    queued = asyncio.create_task(store.put_run(run))
    await asyncio.sleep(0.01)  # let it queue behind the held job
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    gate.release.set()
    await busy
    assert await store.get_run(run.key) is None


async def test_closing_waits_for_a_statement_a_cancelled_caller_left_running(
    tmp_path: Path,
) -> None:
    path = tmp_path / "closing.db"
    db = await connect(path)
    gate = Gate()

    def slow_write(tx: Transaction) -> None:
        cursor = tx.cursor()
        cursor.execute("CREATE TABLE hits (n INTEGER)")
        gate.hold()
        cursor.execute("INSERT INTO hits (n) VALUES (1)")
        gate.finished.set()

    caller = asyncio.create_task(db.transaction(slow_write))
    await gate.wait_entered()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller

    closing = asyncio.create_task(db.close())
    await asyncio.sleep(0.05)
    assert not closing.done(), "close must wait for the job still running"
    gate.release.set()
    await asyncio.wait_for(closing, WAIT)
    assert gate.finished.is_set()

    reopened = await connect(path)
    try:
        assert await reopened.transaction(lambda tx: _counter(tx.cursor())) == 1
    finally:
        await reopened.close()


async def test_an_effect_failing_after_it_ended_the_transaction_is_reported_as_itself(
    db: Database,
) -> None:
    checkpointer = SqliteCheckpointer(db)
    holder = await checkpointer.claim("wf", 30.0, 30.0)
    assert holder is not None

    def rolls_back_then_fails(cursor: sqlite3.Cursor) -> object:
        cursor.execute("ROLLBACK")
        raise LookupError("the effect's own failure")

    with pytest.raises(LookupError, match="the effect's own failure"):
        await checkpointer.transact(holder, "step", rolls_back_then_fails)
    assert await checkpointer.load("wf") == {}
    # The connection is still usable and has no transaction left over.
    assert (await checkpointer.record(holder, "step", 1)).first


async def test_an_effect_that_ends_the_transaction_itself_records_nothing(db: Database) -> None:
    checkpointer = SqliteCheckpointer(db)
    holder = await checkpointer.claim("wf", 30.0, 30.0)
    assert holder is not None

    def commits_early(cursor: sqlite3.Cursor) -> object:
        cursor.execute("COMMIT")
        return "value"

    with pytest.raises(TransactionEndedError):
        await checkpointer.transact(holder, "step", commits_early)
    assert await checkpointer.load("wf") == {}
    assert (await checkpointer.record(holder, "step", 2)).value == 2


async def test_a_failure_inside_a_transaction_is_reported_as_itself_and_rolled_back(
    db: Database,
) -> None:
    store = SqliteStateStore(db)
    run = RunRecord(run_id="r", tenant="t", agent_name="a")

    def write_then_fail(tx: Transaction) -> None:
        store.bound(tx).put_run(run)
        raise KeyError("after the write")

    with pytest.raises(KeyError, match="after the write"):
        await db.transaction(write_then_fail)
    assert await store.get_run(run.key) is None


async def test_a_close_whose_caller_was_cancelled_still_closes_the_file_after_the_running_job(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cancelled-close.db"
    db = await connect(path)
    gate = Gate()
    running = asyncio.create_task(db.transaction(lambda tx: gate.hold()))
    await gate.wait_entered()

    closing = asyncio.create_task(db.close())
    await asyncio.sleep(0.05)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    gate.release.set()
    await asyncio.wait_for(running, WAIT)
    await asyncio.wait_for(db.close(), WAIT)  # idempotent: waits for the close under way

    # The last connection to a WAL file checkpoints it and removes the -wal file on close.
    wal_left = await asyncio.to_thread(Path(f"{path}-wal").exists)
    assert not wal_left, "the connection was left open"
