"""An idle SQLite work queue wakes on new work: at once in-process, soon across processes."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path

import pytest

from durably.engine.worker import Worker
from durably.sqlite import SqliteStateStore, SqliteWorkQueue, connect
from durably.sqlite.settings import SqliteStoreSettings
from durably.stores.runs import RunRecord
from durably.stores.work import WorkItem

# Long enough that only a wake-up, never the fallback, can end a wait the tests time.
NEVER = 60.0

ENQUEUE_FROM_ANOTHER_PROCESS = """
import asyncio, sys
from durably.stores.runs import RunRecord
from durably.sqlite import SqliteStateStore, SqliteWorkQueue, connect
from durably.stores.work import WorkItem

async def main() -> None:
    db = await connect(sys.argv[1])
    try:
        await SqliteWorkQueue(db).enqueue(WorkItem(id=sys.argv[2], tenant="acme"))
    finally:
        await db.close()

asyncio.run(main())
"""


async def _enqueue_in_another_process(path: Path, item_id: str) -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ENQUEUE_FROM_ANOTHER_PROCESS, str(path), item_id
    )
    assert await child.wait() == 0


async def test_an_enqueue_through_the_same_database_wakes_an_idle_waiter_at_once(
    tmp_path: Path,
) -> None:
    # With watch_seconds this long only the in-process pulse can wake the waiter.
    settings = SqliteStoreSettings(path=str(tmp_path / "q.db"), watch_seconds=NEVER)
    db = await connect(settings=settings)
    try:
        queue = SqliteWorkQueue(db)
        waiting = asyncio.create_task(queue.wait_for_work("default", within=NEVER))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await queue.enqueue(WorkItem(id="job-1", tenant="acme"))
        assert await asyncio.wait_for(waiting, timeout=10) is True
    finally:
        await db.close()


async def test_an_enqueue_in_a_bound_transaction_wakes_the_waiter_when_it_commits(
    tmp_path: Path,
) -> None:
    settings = SqliteStoreSettings(path=str(tmp_path / "q.db"), watch_seconds=NEVER)
    db = await connect(settings=settings)
    try:
        queue = SqliteWorkQueue(db)
        waiting = asyncio.create_task(queue.wait_for_work("default", within=NEVER))
        await asyncio.sleep(0.05)
        await db.transaction(lambda tx: queue.bound(tx).enqueue(WorkItem(id="j", tenant="a")))
        assert await asyncio.wait_for(waiting, timeout=10) is True
    finally:
        await db.close()


async def test_a_failed_item_requeued_wakes_an_idle_waiter(tmp_path: Path) -> None:
    settings = SqliteStoreSettings(path=str(tmp_path / "q.db"), watch_seconds=NEVER)
    db = await connect(settings=settings)
    try:
        queue = SqliteWorkQueue(db)
        await queue.enqueue(WorkItem(id="job-1", tenant="acme"))
        item = await queue.claim(worker="w1")
        assert item is not None
        waiting = asyncio.create_task(queue.wait_for_work("default", within=NEVER))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await queue.fail(item.id, tenant=item.tenant, worker="w1", error="boom")
        assert await asyncio.wait_for(waiting, timeout=10) is True
    finally:
        await db.close()


async def test_an_enqueue_from_another_process_wakes_an_idle_waiter(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    db = await connect(path)
    try:
        queue = SqliteWorkQueue(db)
        waiting = asyncio.create_task(queue.wait_for_work("default", within=NEVER))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await _enqueue_in_another_process(path, "from-elsewhere")
        assert await asyncio.wait_for(waiting, timeout=10) is True
        item = await queue.claim(worker="w1")
        assert item is not None
        assert item.id == "from-elsewhere"
    finally:
        await db.close()


async def test_a_wait_with_nothing_written_ends_false_at_its_deadline(tmp_path: Path) -> None:
    db = await connect(tmp_path / "q.db")
    try:
        started = time.monotonic()
        assert await SqliteWorkQueue(db).wait_for_work("default", within=0.2) is False
        assert time.monotonic() - started >= 0.2
    finally:
        await db.close()


async def test_an_idle_waiter_does_not_burn_a_core(tmp_path: Path) -> None:
    db = await connect(tmp_path / "q.db")
    try:
        cpu, wall = time.process_time(), time.monotonic()
        assert await SqliteWorkQueue(db).wait_for_work("default", within=1.0) is False
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        # A hundred counter reads a second: a few per cent of one core at most.
        assert cpu < 0.25 * wall, f"{cpu:.3f} s of CPU over {wall:.3f} s idle"
    finally:
        await db.close()


async def test_an_idle_worker_starts_a_job_enqueued_by_another_process_without_its_poll(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    db = await connect(path)
    started = asyncio.Event()

    async def handler(item: WorkItem) -> None:
        started.set()

    # A poll this long never fires within the test: only the wake-up can start the job.
    worker = Worker(poll_seconds=NEVER, grace_seconds=5)
    worker.handle(SqliteWorkQueue(db), handler)
    running = asyncio.create_task(worker.run(install_signal_handlers=False))
    try:
        await asyncio.sleep(0.3)  # the worker found the queue empty and went idle
        assert not started.is_set()
        await _enqueue_in_another_process(path, "job-x")
        await asyncio.wait_for(started.wait(), timeout=10)
    finally:
        worker.stop()
        await asyncio.wait_for(running, timeout=30)
        await db.close()


@pytest.mark.parametrize("watch_seconds", [0.0, -1.0])
def test_watch_seconds_must_be_positive(tmp_path: Path, watch_seconds: float) -> None:
    with pytest.raises(ValueError, match="watch_seconds"):
        SqliteStoreSettings(path=str(tmp_path / "q.db"), watch_seconds=watch_seconds)


async def test_this_processs_own_other_writes_do_not_wake_an_idle_waiter(tmp_path: Path) -> None:
    # Writes that make no work claimable (a run record here) must not turn an idle
    # worker into a claim loop: only other connections' commits and this store's
    # enqueues wake it.
    db = await connect(tmp_path / "q.db")
    try:
        queue, state = SqliteWorkQueue(db), SqliteStateStore(db)
        waiting = asyncio.create_task(queue.wait_for_work("default", within=NEVER))
        for n in range(20):
            await state.put_run(RunRecord(run_id=f"run-{n}", tenant="acme", agent_name="a"))
            await asyncio.sleep(0.02)
        assert not waiting.done()
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
    finally:
        await db.close()


async def test_a_commit_through_another_database_of_this_process_wakes_the_waiter(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    db, other = await connect(path), await connect(path)
    try:
        waiting = asyncio.create_task(SqliteWorkQueue(db).wait_for_work("default", within=NEVER))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await SqliteWorkQueue(other).enqueue(WorkItem(id="job-1", tenant="acme"))
        assert await asyncio.wait_for(waiting, timeout=10) is True
    finally:
        await other.close()
        await db.close()
