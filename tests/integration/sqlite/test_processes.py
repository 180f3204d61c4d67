"""Several OS processes sharing one SQLite file."""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from durably.errors import StatePersistenceError
from durably.sqlite import (
    SqliteCheckpointer,
    SqliteScheduler,
    SqliteStateStore,
    SqliteWorkQueue,
    connect,
)
from durably.sqlite.connection import SCHEMA_VERSION
from durably.sqlite.settings import SqliteStoreSettings
from durably.stores.runs import RunState, StateKey
from durably.stores.work import WorkItem, WorkState

HELPER = Path(__file__).with_name("worker_process.py")
TENANT = "tenant {1}"


async def test_a_file_left_by_one_process_is_picked_up_by_another(tmp_path: Path) -> None:
    path = tmp_path / "left.db"
    left = await asyncio.create_subprocess_exec(sys.executable, str(HELPER), "leave", str(path))
    assert await left.wait() == 0

    db = await connect(path)
    try:
        run = await SqliteStateStore(db).get_run(StateKey(tenant=TENANT, id="run:1"))
        assert run is not None
        assert run.state is RunState.RUNNING
        assert run.version == 1
        item = await SqliteWorkQueue(db).claim(worker="second process")
        assert item is not None
        assert (item.id, item.tenant, item.state) == ("job 🚀", TENANT, WorkState.CLAIMED)
        checkpointer = SqliteCheckpointer(db)
        assert await checkpointer.load("wf;1") == {"paid step": {"tokens": 12}}
        delivery = await SqliteScheduler(db, lease=5.0).next_ready(0)
        assert delivery is not None
        assert delivery.workflow == "wf;1"
    finally:
        await db.close()


async def test_two_processes_claiming_from_one_file_never_take_the_same_item(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.db"
    db = await connect(path)
    try:
        queue = SqliteWorkQueue(db)
        await db.transaction(
            lambda tx: [
                queue.bound(tx).enqueue(WorkItem(id=f"item-{n}", tenant=f"tenant-{n % 7}"))
                for n in range(1000)
            ]
        )
    finally:
        await db.close()

    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(HELPER),
            "claim",
            str(path),
            name,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for name in ("process-a", "process-b")
    ]
    for worker in workers:
        assert worker.stdout is not None
        assert (await asyncio.wait_for(worker.stdout.readline(), 30)).strip() == b"ready"
    for worker in workers:  # start both at once, so their claims interleave
        assert worker.stdin is not None
        worker.stdin.write(b"go\n")
    finished = await asyncio.wait_for(
        asyncio.gather(*(worker.communicate() for worker in workers)), 90
    )
    outputs = [stdout.decode().split() for stdout, _ in finished]
    assert [worker.returncode for worker in workers] == [0, 0]

    claimed = Counter(item for output in outputs for item in output)
    assert set(claimed) == {f"item-{n}" for n in range(1000)}
    assert max(claimed.values()) == 1, "an item was claimed by both processes"
    assert all(outputs), "both processes should have claimed some of the items"

    db = await connect(path)
    try:
        stats = await SqliteWorkQueue(db).stats()
        assert (stats.depth, stats.claimed) == (0, 0)
    finally:
        await db.close()


async def test_a_fleet_of_processes_opening_a_fresh_file_at_once_all_open_it(
    tmp_path: Path,
) -> None:
    rounds, interval = 40, 0.1
    openers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(HELPER),
            "open",
            str(tmp_path),
            str(rounds),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(8)
    ]
    for opener in openers:
        assert opener.stdout is not None
        assert (await asyncio.wait_for(opener.stdout.readline(), 30)).strip() == b"ready"
    start = time.time() + 0.5
    for opener in openers:  # every round, every process opens the same fresh file at once
        assert opener.stdin is not None
        opener.stdin.write(f"go {start} {interval}\n".encode())
    finished = await asyncio.wait_for(
        asyncio.gather(*(opener.communicate() for opener in openers)), 90
    )
    assert [opener.returncode for opener in openers] == [0] * len(openers)
    failures = [
        line for stdout, _ in finished for line in stdout.decode().splitlines() if line != "ok"
    ]
    assert failures == []
    assert sum(len(stdout.decode().splitlines()) for stdout, _ in finished) == 8 * rounds

    db = await connect(tmp_path / "0.db")
    try:
        row = await db.transaction(
            lambda tx: tx.row("SELECT version FROM durably_schema_version"), write=False
        )
        assert row[0] == SCHEMA_VERSION
    finally:
        await db.close()


async def test_opening_a_file_another_process_keeps_locked_is_contended_not_misconfigured(
    tmp_path: Path,
) -> None:
    path = tmp_path / "held.db"
    await (await connect(path)).close()
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HELPER),
        "hold",
        str(path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert holder.stdout is not None
    assert (await asyncio.wait_for(holder.stdout.readline(), 30)).strip() == b"holding"
    try:
        settings = SqliteStoreSettings(path=str(path), busy_timeout_seconds=0.05)
        with pytest.raises(StatePersistenceError) as refused:
            await connect(settings=settings)
        assert refused.value.reason == "contended"
        assert refused.value.retryable
        assert str(path) in str(refused.value)
    finally:
        await holder.communicate(b"release\n")
    assert holder.returncode == 0
    await (await connect(settings=settings)).close()  # the lock let go: it opens again
