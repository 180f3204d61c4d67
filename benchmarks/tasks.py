"""Task figures on every backing: `enqueue_many` of 1,000 items against the single-call
floor (the same 1,000 items one `enqueue` call each), and 1,000 task items drained through
``app.serve()`` against the same jobs through the engine's `Worker`.

Run with ``python -m benchmarks.tasks`` (or through ``make bench``). SQLite runs on a file
in a temporary directory; PostgreSQL on a scratch database of ``DURABLY_BENCH_POSTGRES_DSN``
(default the local server); Redis on a redis-server started for the run (AOF, fsync every
second), or ``DURABLY_BENCH_REDIS_DSN``. Each figure is the median of ``RUNS`` runs; the
drain pairs alternate which side goes first.
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
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import durably
from durably.engine.worker import Worker
from durably.stores import open_stores
from durably.stores.work import WorkItem

ITEMS = 1000
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


async def enqueue_rates(dsn: str) -> tuple[float, float]:
    """Items/s enqueued one call each, then by one `enqueue_many` of ``ITEMS``."""
    stores = await open_stores(dsn)
    try:
        await stores.migrate()
        single = _items(f"t-{uuid.uuid4().hex[:8]}", "single")
        started = time.perf_counter()
        for item in single:
            await stores.queue.enqueue(item)
        one_by_one = ITEMS / (time.perf_counter() - started)
        batch = _items(f"t-{uuid.uuid4().hex[:8]}", "batch")
        started = time.perf_counter()
        await stores.queue.enqueue_many(batch)
        batched = ITEMS / (time.perf_counter() - started)
        return one_by_one, batched
    finally:
        await stores.close()


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
    singles: list[float] = []
    batches: list[float] = []
    served: list[float] = []
    bare: list[float] = []
    for run in range(RUNS):
        one, many = await enqueue_rates(dsn)
        singles.append(one)
        batches.append(many)
        sides = [(served, served_rate), (bare, worker_rate)]
        for rates, measure in sides if run % 2 == 0 else sides[::-1]:
            rates.append(await measure(dsn))
    single, batch = statistics.median(singles), statistics.median(batches)
    app_rate, worker = statistics.median(served), statistics.median(bare)
    print(
        f"{label:10} {single:10,.0f} {batch:12,.0f} {batch / single:6.1f}x "
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
        f"{ITEMS:,} items; enqueue_many vs one enqueue call each; app.serve() vs a bare "
        f"Worker (concurrency {CONCURRENCY}); items/s, median of {RUNS}"
    )
    print(
        f"{'backing':10} {'single':>10} {'enqueue_many':>12} {'ratio':>7} "
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
