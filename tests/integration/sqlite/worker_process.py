"""Run as a separate OS process by the SQLite integration tests.

python worker_process.py leave <db>           write a run, work and a checkpoint, exit
python worker_process.py claim <db> <worker>  say "ready", wait for "go" on stdin, then
                                              claim, work 2 ms and complete until the queue
                                              is empty, printing each claimed item id
python worker_process.py open <dir> <rounds>  say "ready", wait for "go <start> <interval>"
                                              on stdin, then open <dir>/<n>.db at wall time
                                              start + n * interval for each round n,
                                              printing "ok" or the error of each
python worker_process.py hold <db>            take the write lock, say "holding", keep it
                                              until a line arrives on stdin, then commit
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from pathlib import Path

from durably.clock import SystemClock
from durably.sqlite import (
    SqliteCheckpointer,
    SqliteScheduler,
    SqliteStateStore,
    SqliteWorkQueue,
    connect,
)
from durably.stores.runs import RunRecord, RunState
from durably.stores.work import WorkItem

TENANT = "tenant {1}"


async def leave(path: str) -> None:
    db = await connect(path)
    try:
        state = SqliteStateStore(db, clock=SystemClock())
        queue = SqliteWorkQueue(db, clock=SystemClock())
        run = RunRecord(run_id="run:1", tenant=TENANT, agent_name="agent", state=RunState.RUNNING)
        await db.transaction(
            lambda tx: (
                state.bound(tx).put_run(run),
                queue.bound(tx).enqueue(WorkItem(id="job 🚀", tenant=TENANT)),
            )
        )
        checkpointer = SqliteCheckpointer(db)
        holder = await checkpointer.claim("wf;1", 30.0, 30.0)
        assert holder is not None
        await checkpointer.record(holder, "paid step", {"tokens": 12})
        await SqliteScheduler(db, lease=5.0).make_ready("wf;1")
    finally:
        await db.close()


async def claim(path: str, worker: str) -> None:
    db = await connect(path)
    try:
        queue = SqliteWorkQueue(db, clock=SystemClock())
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        while True:
            item = await queue.claim(worker=worker)
            if item is None:
                break
            # The item's work, holding no lock: without it one process can take the whole
            # queue while the other's busy handler sleeps (SQLite's backs off to 100 ms).
            await asyncio.sleep(0.002)
            await queue.complete(item.id, tenant=item.tenant, worker=worker)
            print(item.id, flush=True)
    finally:
        await db.close()


async def open_fresh(directory: str, rounds: int) -> None:
    print("ready", flush=True)
    start, interval = map(float, (await asyncio.to_thread(sys.stdin.readline)).split()[1:])
    for n in range(rounds):
        at = start + n * interval
        await asyncio.sleep(max(0.0, at - time.time() - 0.01))
        while time.time() < at:  # spin the last moment: the processes start together
            pass
        try:
            db = await connect(Path(directory) / f"{n}.db")
        except Exception as exc:
            print(f"round {n}: {type(exc).__name__}: {exc}", flush=True)
        else:
            await db.close()
            print("ok", flush=True)


def hold(path: str) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    print("holding", flush=True)
    sys.stdin.readline()
    connection.execute("COMMIT")
    connection.close()


def main() -> None:
    command, path, *rest = sys.argv[1:]
    if command == "leave":
        asyncio.run(leave(path))
    elif command == "claim":
        asyncio.run(claim(path, rest[0]))
    elif command == "hold":
        hold(path)
    elif command == "open":
        asyncio.run(open_fresh(path, int(rest[0])))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
