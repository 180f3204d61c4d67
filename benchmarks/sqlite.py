"""SQLite backing throughput: enqueue, claim+complete at concurrency 10 (raw loops, then a
`Worker` against them in alternating runs), steps recorded.

Run with ``python -m benchmarks.sqlite`` (or through ``make bench``). Each figure is the
median of three runs, each on a fresh file in a temporary directory, with the backing's
real durability settings (WAL, ``synchronous=FULL``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from benchmarks import drains, sqlite_idle
from benchmarks.drains import CountingCompletions
from durably.sqlite import Database, SqliteCheckpointer, SqliteWorkQueue, connect
from durably.stores.work import WorkItem

ITEMS = 1000
STEPS = 1000
CONCURRENCY = 10
RUNS = 3

Measure = Callable[[Path], Awaitable[float]]


async def enqueued_per_second(path: Path) -> float:
    """Work items enqueued one call (one commit) at a time."""
    db = await connect(path)
    try:
        queue = SqliteWorkQueue(db)
        started = time.perf_counter()
        for n in range(ITEMS):
            await queue.enqueue(WorkItem(id=f"item-{n}", tenant=f"tenant-{n % 10}"))
        return ITEMS / (time.perf_counter() - started)
    finally:
        await db.close()


async def _fill(db: Database, queue: SqliteWorkQueue) -> None:
    await db.transaction(
        lambda tx: [
            queue.bound(tx).enqueue(WorkItem(id=f"item-{n}", tenant=f"tenant-{n % 10}"))
            for n in range(ITEMS)
        ]
    )


async def claimed_and_completed_per_second(path: Path) -> float:
    """Items drained by one process running ``CONCURRENCY`` claim→complete loops."""
    db = await connect(path)
    try:
        queue = SqliteWorkQueue(db)
        await _fill(db, queue)

        async def loop(worker: str) -> int:
            done = 0
            while (item := await queue.claim(worker=worker)) is not None:
                await queue.complete(item.id, tenant=item.tenant, worker=worker)
                done += 1
            return done

        started = time.perf_counter()
        done = await asyncio.gather(*(loop(f"worker-{n}") for n in range(CONCURRENCY)))
        elapsed = time.perf_counter() - started
        assert sum(done) == ITEMS
        return ITEMS / elapsed
    finally:
        await db.close()


class _CountingQueue(CountingCompletions, SqliteWorkQueue):
    """Counts completions, so a Worker's drain is timed to its last settle."""


async def worker_drained_per_second(path: Path) -> float:
    """Items drained by a `Worker` at concurrency ``CONCURRENCY`` with an empty handler,
    timed from its start to the last settle."""
    db = await connect(path)
    try:
        queue = _CountingQueue(db)
        await _fill(db, queue)
        return await drains.worker_drain(queue, ITEMS, CONCURRENCY)
    finally:
        await db.close()


async def _worker_ratio() -> tuple[float, float]:
    """The Worker's drain ÷ the raw loops', each run alternating with the other: the median
    ratio and the Worker's median rate."""
    ratios, rates = [], []
    for n in range(RUNS + 2):
        sides: list[Measure] = [claimed_and_completed_per_second, worker_drained_per_second]
        if n % 2:
            sides.reverse()
        measured: dict[Measure, float] = {}
        for measure in sides:
            with tempfile.TemporaryDirectory(prefix="durably-bench-") as directory:
                measured[measure] = await measure(Path(directory) / "bench.db")
        worker = measured[worker_drained_per_second]
        ratios.append(worker / measured[claimed_and_completed_per_second])
        rates.append(worker)
    return statistics.median(ratios), statistics.median(rates)


async def steps_recorded_per_second(path: Path) -> float:
    """Workflow steps recorded one after another by one pass."""
    db = await connect(path)
    try:
        checkpointer = SqliteCheckpointer(db)
        # The Worker's defaults (budget 3600 s, alive 30 s): every record renews.
        holder = await checkpointer.claim("workflow", 3600.0, 30.0)
        assert holder is not None
        started = time.perf_counter()
        for n in range(STEPS):
            await checkpointer.record(holder, f"step-{n}", {"n": n, "tokens": 128})
        return STEPS / (time.perf_counter() - started)
    finally:
        await db.close()


async def _median(measure: Measure) -> float:
    rates = []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory(prefix="durably-bench-") as directory:
            rates.append(await measure(Path(directory) / "bench.db"))
    return statistics.median(rates)


async def _figures() -> list[tuple[str, float]]:
    ratio, worker = await _worker_ratio()
    return [
        ("work items enqueued", await _median(enqueued_per_second)),
        (
            f"claimed+completed (1 process, {CONCURRENCY} tasks)",
            await _median(claimed_and_completed_per_second),
        ),
        (f"same, through a Worker (concurrency {CONCURRENCY})", worker),
        ("  Worker ÷ the loops (paired runs, median ratio)", ratio),
        ("workflow steps recorded", await _median(steps_recorded_per_second)),
    ]


def main() -> None:
    """Print the SQLite figures as a small table."""
    figures = asyncio.run(_figures())
    print(
        f"SQLite {sqlite3.sqlite_version} (WAL, synchronous=FULL; "
        f"median of {RUNS} runs, temporary directory)"
    )
    width = max(len(name) for name, _ in figures)
    print(f"{'operation':<{width}}  {'per second':>10}")
    for name, rate in figures:
        print(
            f"{name:<{width}}  {rate:>10,.2f}" if rate < 10 else f"{name:<{width}}  {rate:>10,.0f}"
        )
    sqlite_idle.main()


if __name__ == "__main__":
    main()
