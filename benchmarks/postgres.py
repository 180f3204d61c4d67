"""PostgreSQL figures, each also as a ratio to a floor measured in the same run.

The floor is a minimal queue of our own over the same server (single-row INSERT, batched
``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT k)``, DELETE), so the
ratios survive a noisy machine where absolute figures do not. Medians of three runs.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from durably.clock import SystemClock
from durably.postgres import PostgresCheckpointer, PostgresWorkQueue, StateTables, migrate
from durably.postgres.executor import database_for
from durably.work import QueuePolicy, WorkItem

ADMIN_DSN = os.environ.get(
    "DURABLY_BENCH_POSTGRES_DSN", "postgresql://root@127.0.0.1:5432/postgres"
)
RUNS = 3
ENQUEUES = 300
DRAIN = 1200
CONCURRENCY = 10
BATCH = 10
PROCESSES = 4
LATENCY_SAMPLES = 60
IDLE_SECONDS = 0.02  # how long the waiting side sits idle before each latency sample
STEPS = 300


def _floor_statements(schema: str) -> dict[str, str]:
    from pathlib import Path

    text = (Path(__file__).parent / "postgres_floor.sql").read_text()
    parts = text.split("-- name: ")[1:]
    found: dict[str, str] = {}
    for part in parts:
        name, _, body = part.partition("\n")
        found[name.strip()] = body.strip().rstrip(";").replace("{schema}", schema)
    return found


def _dsn(database: str) -> str:
    return urlunsplit(urlsplit(ADMIN_DSN)._replace(path=f"/{database}"))


async def _pool(dsn: str, size: int = CONCURRENCY + 2) -> Any:
    from psycopg_pool import AsyncConnectionPool

    pool: Any = AsyncConnectionPool(
        dsn,
        min_size=size,
        max_size=size,
        kwargs={"options": "-c statement_timeout=30000"},
        open=False,
    )
    await pool.open(wait=True)
    return pool


async def _fetch(pool: Any, statement: str, *args: Any) -> Any:
    async with database_for(pool).session(10.0) as session:
        return await session.fetch(statement, *args)


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


async def _rate(count: int, body: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await body()
    return count / (time.perf_counter() - started)


# --- floor ------------------------------------------------------------------------------


async def floor_enqueue(pool: Any, sql: dict[str, str]) -> float:
    async def body() -> None:
        for n in range(ENQUEUES):
            await _fetch(pool, sql["enqueue"], f'{{"n": {n}}}')

    rate = await _rate(ENQUEUES, body)
    await _fetch(pool, sql["clear"])
    return rate


async def floor_drain(pool: Any, sql: dict[str, str], total: int) -> float:
    async def worker() -> None:
        while True:
            rows = await _fetch(pool, sql["claim"], BATCH)
            if not rows:
                return
            for (job,) in rows:
                await _fetch(pool, sql["complete"], job)

    return await _rate(total, lambda: _gather(worker() for _ in range(CONCURRENCY)))


async def _gather(coroutines: Any) -> None:
    await asyncio.gather(*coroutines)


async def floor_fill(pool: Any, sql: dict[str, str], total: int) -> None:
    for start in range(0, total, 100):
        await asyncio.gather(
            *(_fetch(pool, sql["enqueue"], "{}") for _ in range(min(100, total - start)))
        )


async def floor_latency(
    dsn: str, pool: Any, sql: dict[str, str], schema: str, idle: float = 0.0
) -> list[float]:
    """Enqueue-to-claimed. With ``idle`` the listener first sits idle that long, exactly as
    durably's worker does before each sample: that is the floor the latency ratios use,
    since the issue measures an *idle* worker and waking an idle process alone costs about
    a millisecond here. Back to back (``idle=0``) is printed for reference."""
    import psycopg

    samples = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as listener:
        await listener.execute(f'LISTEN "floor_{schema}"')
        for _ in range(LATENCY_SAMPLES):
            if idle:
                await asyncio.sleep(idle)
            started = time.perf_counter()
            await _fetch(pool, sql["enqueue_notify"], "{}")
            async for _note in listener.notifies(timeout=5.0, stop_after=1):
                pass
            rows = await _fetch(pool, sql["claim"], 1)
            samples.append(time.perf_counter() - started)
            await _fetch(pool, sql["complete"], rows[0][0])
    return samples


# --- durably -------------------------------------------------------------------------


def _queue(pool: Any, tables: StateTables) -> PostgresWorkQueue:
    return PostgresWorkQueue(
        pool, clock=SystemClock(), policy=QueuePolicy(lease_seconds=60), tables=tables
    )


async def durably_enqueue(queue: PostgresWorkQueue) -> float:
    async def body() -> None:
        for n in range(ENQUEUES):
            await queue.enqueue(WorkItem(id=uuid.uuid4().hex, tenant="t", payload={"n": str(n)}))

    return await _rate(ENQUEUES, body)


async def durably_fill(queue: PostgresWorkQueue, total: int) -> None:
    for start in range(0, total, 100):
        await asyncio.gather(
            *(
                queue.enqueue(WorkItem(id=uuid.uuid4().hex, tenant=f"t{n % 4}"))
                for n in range(min(100, total - start))
            )
        )


async def durably_drain(queue: PostgresWorkQueue, total: int) -> float:
    async def worker(name: str) -> None:
        while True:
            batch = await queue.claim_many(worker=name, limit=BATCH)
            if not batch:
                return
            for item in batch:
                await queue.complete(item.id, tenant=item.tenant, worker=name)

    return await _rate(total, lambda: _gather(worker(f"w{n}") for n in range(CONCURRENCY)))


async def durably_latency(queue: PostgresWorkQueue) -> list[float]:
    samples = []
    await queue.wait_for_work(within=0)
    await queue.listener.ready()
    for _ in range(LATENCY_SAMPLES):
        ready = asyncio.Event()
        taken: list[float] = []

        async def idle_worker(ready: asyncio.Event = ready, taken: list[float] = taken) -> None:
            ready.set()
            while True:
                item = await queue.claim(worker="idle")
                if item is not None:
                    taken.append(time.perf_counter())
                    await queue.complete(item.id, tenant=item.tenant, worker="idle")
                    return
                await queue.wait_for_work(within=5.0)

        task = asyncio.create_task(idle_worker())
        await ready.wait()
        await asyncio.sleep(IDLE_SECONDS)  # let the worker go idle on its wait
        started = time.perf_counter()
        await queue.enqueue(WorkItem(id=uuid.uuid4().hex, tenant="t"))
        await task
        samples.append(taken[0] - started)
    return samples


async def durably_steps(pool: Any, tables: StateTables) -> tuple[float, float]:
    cp = PostgresCheckpointer(pool, tables=tables)
    holder = await cp.claim(uuid.uuid4().hex, 600, 600)
    assert holder is not None

    async def record() -> None:
        for n in range(STEPS):
            await cp.record(holder, f"s{n}", {"n": n})

    async def effect(cursor: Any) -> object:
        return 1

    async def transact() -> None:
        for n in range(STEPS):
            await cp.transact(holder, f"t{n}", effect)

    return await _rate(STEPS, record), await _rate(STEPS, transact)


# --- processes -------------------------------------------------------------------------


def _child(kind: str, dsn: str, schema: str, total: int, start: Any) -> None:
    async def run() -> None:
        pool = await _pool(dsn)
        try:
            start.wait()
            if kind == "floor":
                await floor_drain(pool, _floor_statements(schema), total)
            else:
                await durably_drain(_queue(pool, StateTables(schema=schema)), total)
        finally:
            await pool.close()

    asyncio.run(run())


def processes_rate(kind: str, dsn: str, schema: str, total: int) -> float:
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    children = [
        context.Process(target=_child, args=(kind, dsn, schema, total, start))
        for _ in range(PROCESSES)
    ]
    for child in children:
        child.start()
    time.sleep(2.0)  # let every child connect before the clock starts
    started = time.perf_counter()
    start.set()
    for child in children:
        child.join()
    return total / (time.perf_counter() - started)


# --- main ------------------------------------------------------------------------------


async def measure(dsn: str) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}
    pool = await _pool(dsn)
    try:
        for _ in range(RUNS):
            schema = f"b_{uuid.uuid4().hex[:10]}"
            tables = StateTables(schema=schema)
            await migrate(pool, tables)
            sql = _floor_statements(schema)
            await _fetch(pool, sql["create"])
            queue = _queue(pool, tables)

            def add(name: str, value: float) -> None:
                figures.setdefault(name, []).append(value)

            add("floor enqueue/s", await floor_enqueue(pool, sql))
            add("durably enqueue/s", await durably_enqueue(queue))
            await floor_fill(pool, sql, DRAIN)
            add("floor claim+complete/s (1 proc x 10)", await floor_drain(pool, sql, DRAIN))
            await durably_fill(queue, DRAIN)
            drained = await durably_drain(queue, DRAIN)
            add("durably claim+complete/s (1 proc x 10)", drained)
            await floor_fill(pool, sql, DRAIN)
            add(
                "floor claim+complete/s (4 procs x 10)",
                await asyncio.to_thread(processes_rate, "floor", dsn, schema, DRAIN),
            )
            await durably_fill(queue, DRAIN)
            add(
                "durably claim+complete/s (4 procs x 10)",
                await asyncio.to_thread(processes_rate, "durably", dsn, schema, DRAIN),
            )
            busy_samples = await floor_latency(dsn, pool, sql, schema)
            floor_samples = await floor_latency(dsn, pool, sql, schema, idle=IDLE_SECONDS)
            ours = await durably_latency(queue)
            add("floor latency p50 ms", 1000 * statistics.median(floor_samples))
            add("durably latency p50 ms", 1000 * statistics.median(ours))
            add("floor latency p99 ms", 1000 * _p99(floor_samples))
            add("durably latency p99 ms", 1000 * _p99(ours))
            add("(floor latency p50 ms, back to back)", 1000 * statistics.median(busy_samples))
            recorded, transacted = await durably_steps(pool, tables)
            add("durably record steps/s", recorded)
            add("durably transact steps/s", transacted)
            await queue.close()
    finally:
        await pool.close()
    return figures


def _p99(samples: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]


def main() -> None:
    """Create a scratch database, print the table, drop the database."""
    import psycopg

    name = f"durably_bench_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        print(f"PostgreSQL unreachable ({type(error).__name__}); skipped")
        return
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        figures = asyncio.run(measure(_dsn(name)))
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    medians = {key: _median(values) for key, values in figures.items()}
    floors = {
        "durably enqueue/s": "floor enqueue/s",
        "durably claim+complete/s (1 proc x 10)": "floor claim+complete/s (1 proc x 10)",
        "durably claim+complete/s (4 procs x 10)": "floor claim+complete/s (4 procs x 10)",
        "durably latency p50 ms": "floor latency p50 ms",
        "durably latency p99 ms": "floor latency p99 ms",
        "durably record steps/s": "floor enqueue/s",
        "durably transact steps/s": "floor enqueue/s",
    }
    print(f"{'figure (median of ' + str(RUNS) + ')':<44}{'value':>12}{'x floor':>10}")
    for key, value in medians.items():
        ratio = f"{value / medians[floors[key]]:.2f}" if key in floors else ""
        print(f"{key:<44}{value:>12.1f}{ratio:>10}")
    print(
        f"(latency: both sides sit idle {IDLE_SECONDS * 1000:.0f} ms before each sample; "
        "the back-to-back floor is for reference)"
    )
