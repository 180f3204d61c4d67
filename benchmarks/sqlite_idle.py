"""SQLite idle latency: enqueue in one process to handler start in an idle `Worker`.

The floor is a plain loop over a one-table queue that polls every 10 ms (``SELECT`` the
oldest row, ``DELETE`` it). Both sides wait idle, and both are fed by one producer process
that enqueues on command, stamping each job with the system-wide monotonic clock, so the
latency includes the producer's commit and the waiter's discovery of it. Samples alternate
between the sides, and each side idles ``IDLE_SECONDS`` before its sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from durably.engine.worker import Worker
from durably.sqlite import SqliteWorkQueue, connect
from durably.stores.work import WorkItem

SAMPLES = 40  # per side
IDLE_SECONDS = 0.2
FLOOR_POLL_SECONDS = 0.01

PRODUCER = """
import asyncio, sqlite3, sys, time
from durably.sqlite import SqliteWorkQueue, connect
from durably.stores.work import WorkItem

async def main() -> None:
    db = await connect(sys.argv[1])
    queue = SqliteWorkQueue(db)
    floor = sqlite3.connect(sys.argv[2], isolation_level=None)
    floor.execute("PRAGMA journal_mode = WAL")
    floor.execute("PRAGMA synchronous = FULL")
    print("ready", flush=True)
    for line in sys.stdin:
        side, job = line.split()
        sent = repr(time.monotonic())
        if side == "durably":
            await queue.enqueue(WorkItem(id=job, tenant="bench", payload={"sent": sent}))
        else:
            floor.execute("INSERT INTO jobs (id, sent) VALUES (?, ?)", (job, float(sent)))
        print("sent", flush=True)
    await db.close()

asyncio.run(main())
"""


def _floor_take(connection: sqlite3.Connection) -> float | None:
    connection.execute("BEGIN IMMEDIATE")
    row = connection.execute("SELECT seq, sent FROM jobs ORDER BY seq LIMIT 1").fetchone()
    if row is not None:
        connection.execute("DELETE FROM jobs WHERE seq = ?", (row[0],))
    connection.execute("COMMIT")
    return None if row is None else float(row[1])


async def _floor_loop(path: Path, latencies: asyncio.Queue[float]) -> None:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        while True:
            sent = await asyncio.to_thread(_floor_take, connection)
            if sent is None:
                await asyncio.sleep(FLOOR_POLL_SECONDS)
            else:
                await latencies.put(time.monotonic() - sent)
    finally:
        connection.close()


async def idle_latencies(directory: Path) -> tuple[list[float], list[float]]:
    """(durably, floor) enqueue-to-start latencies in seconds, ``SAMPLES`` each."""
    durably_path, floor_path = directory / "durably.db", directory / "floor.db"
    floor = sqlite3.connect(floor_path, isolation_level=None)
    floor.execute("PRAGMA journal_mode = WAL")
    floor.execute("CREATE TABLE jobs (seq INTEGER PRIMARY KEY, id TEXT, sent REAL)")
    floor.close()
    db = await connect(durably_path)
    started: asyncio.Queue[float] = asyncio.Queue()
    floor_started: asyncio.Queue[float] = asyncio.Queue()

    async def handler(item: WorkItem) -> None:
        await started.put(time.monotonic() - float(item.payload["sent"]))

    worker = Worker()  # every default: the latency a user gets without tuning
    worker.handle(SqliteWorkQueue(db), handler)
    running = asyncio.create_task(worker.run(install_signal_handlers=False))
    polling = asyncio.create_task(_floor_loop(floor_path, floor_started))
    producer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PRODUCER,
        str(durably_path),
        str(floor_path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert producer.stdin is not None
    assert producer.stdout is not None
    mine: list[float] = []
    theirs: list[float] = []
    try:
        assert (await producer.stdout.readline()).strip() == b"ready"
        for n in range(SAMPLES * 2):
            side, into, results = (
                ("durably", started, mine) if n % 2 == 0 else ("floor", floor_started, theirs)
            )
            # A jittered pause: a fixed one would lock the send to one phase of each
            # side's 10 ms polling and make the p50 a matter of luck.
            await asyncio.sleep(IDLE_SECONDS + random.uniform(0, 0.02))
            producer.stdin.write(f"{side} job-{n}\n".encode())
            await producer.stdin.drain()
            await producer.stdout.readline()
            results.append(await asyncio.wait_for(into.get(), timeout=30))
    finally:
        producer.stdin.close()
        await producer.wait()
        polling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await polling
        worker.stop()
        await running
        await db.close()
    return mine, theirs


async def idle_cpu_share(directory: Path, seconds: float = 3.0) -> float:
    """The share of one core an idle default `Worker` on an empty queue uses."""
    db = await connect(directory / "idle.db")

    async def handler(item: WorkItem) -> None:
        return None

    worker = Worker()
    worker.handle(SqliteWorkQueue(db), handler)
    running = asyncio.create_task(worker.run(install_signal_handlers=False))
    try:
        await asyncio.sleep(0.5)  # past start-up
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        return (time.process_time() - cpu) / (time.monotonic() - wall)
    finally:
        worker.stop()
        await running
        await db.close()


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    """Print the idle-latency table (p50 and p99 of each side, and their ratio)."""
    with tempfile.TemporaryDirectory(prefix="durably-bench-idle-") as directory:
        mine, theirs = asyncio.run(idle_latencies(Path(directory)))
        cpu = asyncio.run(idle_cpu_share(Path(directory)))
    print(
        f"\nSQLite idle latency, enqueue in another process to handler start "
        f"({SAMPLES} samples a side, alternating; floor polls every "
        f"{FLOOR_POLL_SECONDS * 1000:.0f} ms)"
    )
    print(f"{'figure':<28}  {'durably ms':>10}  {'floor ms':>9}  {'ratio':>6}")
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        ours, floor = _p(mine, q) * 1000, _p(theirs, q) * 1000
        print(
            f"{'idle enqueue-to-start ' + name:<28}  {ours:>10.1f}  {floor:>9.1f}  "
            f"{ours / floor:>6.2f}"
        )
    print(
        f"{'mean':<28}  {statistics.mean(mine) * 1000:>10.1f}  "
        f"{statistics.mean(theirs) * 1000:>9.1f}"
    )

    print(f"idle default Worker: {cpu * 100:.1f}% of one core")


if __name__ == "__main__":
    main()
