"""Task figures on every backing: `enqueue_many` of 1,000 items against the single-call
floor (1,000 items one `enqueue` call each), through the engine's queue and through a
task, and 1,000 task items drained through ``app.serve()`` against the same jobs through
the engine's `Worker`.

Run with ``python -m benchmarks.tasks`` (or through ``make bench``). SQLite runs on a file
in a temporary directory; PostgreSQL on a scratch database of ``DURABLY_BENCH_POSTGRES_DSN``
(default the local server); Redis on a redis-server started for the run (AOF, fsync every
second), or ``DURABLY_BENCH_REDIS_DSN``. Each figure is the median of ``RUNS`` runs; the
enqueue pairs alternate in rounds within a run, the drain pairs which side goes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import durably
from durably.engine.worker import Worker
from durably.stores import open_stores
from durably.stores.work import WorkItem

ITEMS = 1000
SLICES = 5  # the enqueue figures alternate single calls and batches in this many rounds
CONCURRENCY = 10
RUNS = 3
ADMIN_DSN = os.environ.get(
    "DURABLY_BENCH_POSTGRES_DSN", "postgresql://root@127.0.0.1:5432/postgres"
)


def _items(tenant: str, queue: str) -> list[WorkItem]:
    return [
        WorkItem(id=f"item-{n}", tenant=tenant, queue=queue, payload={"n": str(n)})
        for n in range(ITEMS)
    ]


async def _alternated(
    single: Callable[[int], Awaitable[None]], batch: Callable[[], Awaitable[None]]
) -> tuple[float, float]:
    """Items/s of ``single`` calls and of ``batch``es of ``ITEMS``, in ``SLICES`` rounds:
    each round ``single(n)`` (``ITEMS // SLICES`` items one call each, ``n``-th slice)
    and one batch, which goes first in turn."""
    spent = [0.0, 0.0]
    for at in range(SLICES):
        for side in (0, 1) if at % 2 == 0 else (1, 0):
            started = time.perf_counter()
            await (single(at) if side == 0 else batch())
            spent[side] += time.perf_counter() - started
    return ITEMS / spent[0], ITEMS * SLICES / spent[1]


async def enqueue_rates(dsn: str) -> tuple[float, float]:
    """Items/s of the engine's queue: ``ITEMS`` items one `enqueue` call each, and
    `enqueue_many` of ``ITEMS``, alternated after an untimed warm-up (scripts loaded,
    statements prepared)."""
    stores = await open_stores(dsn)
    try:
        await stores.migrate()
        queue = stores.queue
        await queue.enqueue_many(_items(f"t-{uuid.uuid4().hex[:8]}", "warm")[:2])
        singles = _items(f"t-{uuid.uuid4().hex[:8]}", "single")
        per_slice = ITEMS // SLICES

        async def single(at: int) -> None:
            for item in singles[at * per_slice : (at + 1) * per_slice]:
                await queue.enqueue(item)

        batches = [_items(f"t-{uuid.uuid4().hex[:8]}", "batch") for _ in range(SLICES)]

        async def batch() -> None:
            await queue.enqueue_many(batches.pop())

        return await _alternated(single, batch)
    finally:
        await stores.close()


async def task_enqueue_rates(dsn: str) -> tuple[float, float]:
    """Items/s of a task: ``task.enqueue`` one call each against ``task.enqueue_many`` of
    ``ITEMS`` calls, alternated as `enqueue_rates` does."""
    app = durably.App(dsn, tenant=f"t-{uuid.uuid4().hex[:8]}")

    @app.task(name="noop", queue=f"tasks-{uuid.uuid4().hex[:8]}")
    async def noop(n: int) -> None:
        pass

    per_slice = ITEMS // SLICES

    async def single(at: int) -> None:
        for n in range(at * per_slice, (at + 1) * per_slice):
            await noop.enqueue(n)

    calls = [(n,) for n in range(ITEMS)]

    async def batch() -> None:
        await noop.enqueue_many(calls)

    async with app:
        await noop.enqueue_many([(0,), (1,)])
        return await _alternated(single, batch)


async def served_rate(dsn: str) -> float:
    """Items/s of 1,000 empty task runs drained by ``app.serve()``, from its start to the
    last run."""
    app = durably.App(dsn, tenant=f"t-{uuid.uuid4().hex[:8]}")
    queue = f"tasks-{uuid.uuid4().hex[:8]}"
    done = asyncio.Event()
    ran = [0]

    @app.task(name="noop", queue=queue)
    async def noop(n: int) -> None:
        ran[0] += 1
        if ran[0] == ITEMS:
            done.set()

    async with app:
        await noop.enqueue_many([(n,) for n in range(ITEMS)])
        started = time.perf_counter()
        serving = asyncio.create_task(
            app.serve(queues=[queue], concurrency=CONCURRENCY, signals=False, grace=1.0)
        )
        await asyncio.wait_for(done.wait(), 300)
        elapsed = time.perf_counter() - started
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    return ITEMS / elapsed


async def worker_rate(dsn: str) -> float:
    """Items/s of the same 1,000 jobs (an empty handler) through a bare `Worker`."""
    stores = await open_stores(dsn)
    queue = f"jobs-{uuid.uuid4().hex[:8]}"
    done = asyncio.Event()
    ran = [0]

    async def handler(item: WorkItem) -> None:
        ran[0] += 1
        if ran[0] == ITEMS:
            done.set()

    try:
        await stores.migrate()
        await stores.queue.enqueue_many(_items(f"t-{uuid.uuid4().hex[:8]}", queue))
        worker = Worker(grace_seconds=1.0)
        worker.handle(stores.queue, handler, name=queue, concurrency=CONCURRENCY)
        started = time.perf_counter()
        serving = asyncio.create_task(worker.run(install_signal_handlers=False))
        await asyncio.wait_for(done.wait(), 300)
        elapsed = time.perf_counter() - started
        worker.stop()
        await serving
        return ITEMS / elapsed
    finally:
        await stores.close()


async def _section(label: str, dsn: str) -> None:
    engine: list[tuple[float, float]] = []
    tasks: list[tuple[float, float]] = []
    served: list[float] = []
    bare: list[float] = []
    for run in range(RUNS):
        engine.append(await enqueue_rates(dsn))
        tasks.append(await task_enqueue_rates(dsn))
        sides = [(served, served_rate), (bare, worker_rate)]
        for rates, measure in sides if run % 2 == 0 else sides[::-1]:
            rates.append(await measure(dsn))
    single, batch = (statistics.median(side) for side in zip(*engine, strict=True))
    ratio = statistics.median(many / one for one, many in engine)
    task_ratio = statistics.median(many / one for one, many in tasks)
    app_rate, worker = statistics.median(served), statistics.median(bare)
    print(
        f"{label:10} {single:10,.0f} {batch:12,.0f} {ratio:6.1f}x {task_ratio:6.1f}x "
        f"{app_rate:10,.0f} {worker:10,.0f} {app_rate / worker:6.2f}",
        flush=True,
    )


@contextlib.contextmanager
def _postgres() -> Iterator[str | None]:
    import psycopg

    name = f"durably_bench_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        yield None
        return
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(ADMIN_DSN)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def _redis() -> Iterator[str | None]:
    configured = os.environ.get("DURABLY_BENCH_REDIS_DSN")
    if configured:
        yield configured
        return
    if shutil.which("redis-server") is None:
        yield None
        return
    from benchmarks.redis import _started

    with _started("--appendonly", "yes", "--appendfsync", "everysec") as url:
        yield url


async def _all() -> None:
    print(
        f"{ITEMS:,} items; enqueue_many vs one enqueue call each (the engine's queue, and "
        f"a task: 'task'), in {SLICES} alternating rounds; app.serve() vs a bare Worker "
        f"(concurrency {CONCURRENCY}); items/s and ratios, median of {RUNS}"
    )
    print(
        f"{'backing':10} {'single':>10} {'enqueue_many':>12} {'ratio':>7} {'task':>7} "
        f"{'app.serve':>10} {'Worker':>10} {'ratio':>6}"
    )
    await _section("memory", "memory://")
    with tempfile.TemporaryDirectory(prefix="durably-bench-") as directory:
        await _section("sqlite", f"sqlite:///{Path(directory) / 'tasks.db'}")
    with _postgres() as dsn:
        if dsn is None:
            print("postgres   unreachable; skipped")
        else:
            await _section("postgres", dsn)
    with _redis() as dsn:
        if dsn is None:
            print("redis      no redis-server; skipped")
        else:
            await _section("redis", dsn)


def main() -> None:
    """Print the task figures for every backing reachable."""
    asyncio.run(_all())


if __name__ == "__main__":
    main()
