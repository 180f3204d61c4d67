"""A worker process killed with SIGKILL mid-run over a SQLite file: a second worker process
finishes every workflow and item, and no step effect runs twice.

Run as a script, this module is the worker process itself:
``python test_worker_crash.py DB NAME``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from durably import WorkflowStatus, WorkItem
from durably.engine.runtime import Execution
from durably.engine.worker import Worker, start_workflow
from durably.sqlite import (
    Database,
    SqliteCheckpointer,
    SqliteDurable,
    SqliteScheduler,
    SqliteWorkQueue,
    Transaction,
    connect,
)
from durably.stores import QueuePolicy

KIND = "crash"
WORKFLOWS = 6
STEPS = 4
ITEMS = 6
SCHEDULER_LEASE = 1.0
ALIVE = 0.5
ITEM_POLICY = QueuePolicy(lease_seconds=0.6, backoff_seconds=0.05)
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS step_effects (workflow TEXT, step TEXT, pid INTEGER)",
    "CREATE TABLE IF NOT EXISTS item_runs (item TEXT, pid INTEGER)",
)


def stores(db: Database) -> tuple[SqliteDurable, SqliteWorkQueue]:
    durable = SqliteDurable(
        SqliteCheckpointer(db), SqliteScheduler(db, lease=SCHEDULER_LEASE, namespace=KIND)
    )
    return durable, SqliteWorkQueue(db, policy=ITEM_POLICY)


# --- the worker process --------------------------------------------------------------------


async def serve(path: str, name: str) -> None:
    db = await connect(path)
    durable, queue = stores(db)
    pid = os.getpid()

    async def body(run: Execution) -> int:
        for n in range(STEPS):
            step = f"step-{n}"

            def effect(cursor: sqlite3.Cursor, step: str = step) -> str:
                # Committed together with the step's record: exactly once across passes.
                cursor.execute(
                    "INSERT INTO step_effects (workflow, step, pid) VALUES (?, ?, ?)",
                    (run.workflow, step, pid),
                )
                return step

            await run.transact(step, effect)
            await asyncio.sleep(0.1)
        return STEPS

    async def handler(item: WorkItem) -> None:
        await db.transaction(
            lambda tx: tx.execute("INSERT INTO item_runs (item, pid) VALUES (?, ?)", (item.id, pid))
        )
        await asyncio.sleep(0.3)

    worker = Worker(name=name, poll_seconds=0.05, maintenance_seconds=0.1, grace_seconds=5)
    worker.workflow(KIND, body, durable, concurrency=2, alive=ALIVE)
    worker.handle(queue, handler, concurrency=2)
    try:
        await worker.run()
    finally:
        await db.close()


# --- the test ------------------------------------------------------------------------------


def spawn(path: Path, name: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, __file__, str(path), name], stdout=sink, stderr=subprocess.STDOUT
        )


def count(path: Path, sql: str) -> int:
    with sqlite3.connect(path) as connection:
        return int(connection.execute(sql).fetchone()[0])


async def wait_for(condition: object, what: str, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        assert callable(condition)
        result = condition()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.mark.timeout(90)
async def test_a_second_worker_finishes_what_a_killed_worker_left_without_repeating_a_step(
    tmp_path: Path,
) -> None:
    path = tmp_path / "crash.db"
    log = tmp_path / "workers.log"
    db = await connect(path)
    try:
        for statement in SCHEMA:
            await db.transaction(functools.partial(Transaction.execute, sql=statement))
        durable, queue = stores(db)
        for n in range(WORKFLOWS):
            await start_workflow(durable, f"wf {n}: ✈ {{x}}", n)
        for n in range(ITEMS):
            await queue.enqueue(WorkItem(id=f"item-{n}", tenant=f"tenant-{n % 2}"))

        first = spawn(path, "first", log)
        try:
            await wait_for(
                lambda: count(path, "SELECT count(*) FROM step_effects") >= 5, "first steps"
            )
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        killed_at = count(path, "SELECT count(*) FROM step_effects")
        assert killed_at < WORKFLOWS * STEPS, "the first worker finished before it was killed"

        second = spawn(path, "second", log)
        try:

            async def all_completed() -> bool:
                done = await durable.checkpointer.list_status(status=WorkflowStatus.COMPLETED)
                return len(done) == WORKFLOWS

            async def queue_drained() -> bool:
                stats = await queue.stats()
                return (stats.depth, stats.claimed, stats.dead_lettered) == (0, 0, 0)

            await wait_for(all_completed, "every workflow to complete")
            await wait_for(queue_drained, "every item to complete")
        finally:
            second.send_signal(signal.SIGTERM)
            returncode = second.wait(timeout=15)
        assert returncode == 0, log.read_text()
    finally:
        await db.close()

    with sqlite3.connect(path) as connection:
        effects = connection.execute(
            "SELECT workflow, step, count(*), count(DISTINCT pid) FROM step_effects "
            "GROUP BY workflow, step"
        ).fetchall()
        pids = connection.execute("SELECT count(DISTINCT pid) FROM step_effects").fetchone()[0]
        items = dict(connection.execute("SELECT item, count(*) FROM item_runs GROUP BY item"))
    assert len(effects) == WORKFLOWS * STEPS
    assert all(times == 1 for _, _, times, _ in effects), effects
    assert pids == 2  # both workers ran steps: the kill landed mid-run
    assert sorted(items) == [f"item-{n}" for n in range(ITEMS)]


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {sys.argv[2]} %(levelname)s %(message)s"
    )
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
