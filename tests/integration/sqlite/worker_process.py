"""Run as a separate OS process by the SQLite integration tests.

python worker_process.py leave <db>           write a run, work and a checkpoint, exit
python worker_process.py claim <db> <worker>  say "ready", wait for "go" on stdin, then
                                              claim, work 2 ms and complete until the queue
                                              is empty, printing each claimed item id
"""

from __future__ import annotations

import asyncio
import sys

from durably.clock import SystemClock
from durably.runs import RunRecord, RunState
from durably.sqlite import (
    SqliteCheckpointer,
    SqliteScheduler,
    SqliteStateStore,
    SqliteWorkQueue,
    connect,
)
from durably.work import WorkItem

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


def main() -> None:
    command, path, *rest = sys.argv[1:]
    if command == "leave":
        asyncio.run(leave(path))
    elif command == "claim":
        asyncio.run(claim(path, rest[0]))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
