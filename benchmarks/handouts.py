"""Workflow hand-outs at 1 tenant and at 10,000: what serving tenants in rotation costs.

For each backing, two schedulers are filled with the same 10,000 ready workflows, all of
one tenant in the first and one of each of 10,000 tenants in the second; one caller then
times ``SAMPLES`` ``next_ready`` + ``done`` pairs on each, alternating, so a change in the
machine's load shifts both alike. Each row prints the two medians and their ratio (the
cost tests hold it under 2).

Run with ``python -m benchmarks.handouts [memory|sqlite|postgres|redis ...]``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from durably.stores.workflows import Scheduler

WORKFLOWS = 10_000
TENANTS = (1, 10_000)
SAMPLES = 200
AT_ONCE = 16  # make_ready calls in flight while filling over the network

Names = list[tuple[str, str]]
Fill = Callable[[Scheduler, Names], Awaitable[None]]


def named(tenants: int, workflows: int = WORKFLOWS) -> Names:
    """(workflow, tenant) of ``workflows`` ready workflows over ``tenants`` tenants."""
    return [(f"w{n:05d}", f"t{n % tenants:05d}") for n in range(workflows)]


async def fill_calls(scheduler: Scheduler, names: Names) -> None:
    """``names`` made ready through the scheduler, `AT_ONCE` calls at a time."""
    await scheduler.prepare()
    for start in range(0, len(names), AT_ONCE):
        batch = names[start : start + AT_ONCE]
        await asyncio.gather(*(scheduler.make_ready(w, tenant=t) for w, t in batch))


async def _pair(scheduler: Scheduler) -> float:
    began = time.perf_counter()
    delivery = await scheduler.next_ready(0)
    assert delivery is not None
    await scheduler.done(delivery)
    return time.perf_counter() - began


async def medians(schedulers: list[Scheduler], samples: int = SAMPLES) -> list[float]:
    """Median seconds of a hand-out + done on each of ``schedulers``, in alternating rounds."""
    spans: list[list[float]] = [[] for _ in schedulers]
    for _ in range(samples):
        for scheduler, taken in zip(schedulers, spans, strict=True):
            taken.append(await _pair(scheduler))
    return [statistics.median(taken) for taken in spans]


async def measure(make: Callable[[str], Awaitable[Scheduler]], fill: Fill) -> tuple[float, float]:
    """Median ms of a hand-out + done at each of `TENANTS`, in alternating rounds."""
    schedulers = []
    for tenants in TENANTS:
        scheduler = await make(f"handouts-{tenants}")
        await fill(scheduler, named(tenants))
        schedulers.append(scheduler)
    one, many = await medians(schedulers)
    return one * 1000, many * 1000


async def memory() -> tuple[float, float]:
    from durably.memory import MemoryScheduler

    async def make(namespace: str) -> Scheduler:
        return MemoryScheduler(namespace=namespace)

    return await measure(make, fill_calls)


async def sqlite() -> tuple[float, float]:
    from durably.sqlite import SqliteScheduler, connect
    from durably.sqlite.connection import Transaction

    with tempfile.TemporaryDirectory() as folder:
        database = await connect(Path(folder) / "handouts.db")
        try:

            async def make(namespace: str) -> Scheduler:
                return SqliteScheduler(database, namespace=namespace)

            async def fill(scheduler: Scheduler, names: Names) -> None:
                assert isinstance(scheduler, SqliteScheduler)

                def each(tx: Transaction) -> None:
                    for workflow, tenant in names:
                        scheduler.bound(tx).make_ready(workflow, tenant)

                await database.transaction(each)

            return await measure(make, fill)
        finally:
            await database.close()


async def postgres() -> tuple[float, float]:
    import psycopg

    from benchmarks.postgres import ADMIN_DSN, _dsn, _pool
    from durably.postgres import PostgresScheduler, StateTables, migrate
    from durably.postgres.executor import database_for

    name = f"durably_handouts_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    pool: Any = await _pool(_dsn(name), size=2)
    made: list[PostgresScheduler] = []
    try:
        tables = StateTables()
        await migrate(pool, tables)

        async def make(namespace: str) -> Scheduler:
            made.append(PostgresScheduler(pool, namespace=namespace, tables=tables))
            return made[-1]

        async def fill(scheduler: Scheduler, names: Names) -> None:
            # The scheduler's own statement, in one transaction (a commit each is slow).
            assert isinstance(scheduler, PostgresScheduler)
            async with database_for(pool).session(60.0) as session, session.transaction():
                for workflow, tenant in names:
                    await scheduler.make_ready_on(session, workflow, tenant)

        return await measure(make, fill)
    finally:
        for scheduler in made:
            await scheduler.close()
        await pool.close()
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def redis() -> tuple[float, float]:
    from redis.asyncio import Redis

    from benchmarks.redis import server
    from durably.redis import RedisScheduler

    with server() as url:
        client: Any = Redis.from_url(url)
        prefix = f"handouts-{uuid.uuid4().hex[:8]}"
        try:

            async def make(namespace: str) -> Scheduler:
                return RedisScheduler(client, namespace=namespace, key_prefix=prefix)

            return await measure(make, fill_calls)
        finally:
            async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
                await client.delete(key)
            await client.aclose()


BACKINGS: dict[str, Callable[[], Coroutine[Any, Any, tuple[float, float]]]] = {
    "memory": memory,
    "sqlite": sqlite,
    "postgres": postgres,
    "redis": redis,
}


def main(argv: list[str] | None = None) -> None:
    """Print one row per backing named (all by default)."""
    chosen = argv or list(BACKINGS)
    print(f"next_ready + done, median of {SAMPLES}, {WORKFLOWS:,} ready workflows")
    print(f"{'backing':10} {'1 tenant':>10} {'10,000 tenants':>15} {'ratio':>7}")
    for name in chosen:
        try:
            one, many = asyncio.run(BACKINGS[name]())
        except Exception as error:  # an unreachable server skips its row only
            print(f"{name:10} skipped ({type(error).__name__}: {error})")
            continue
        print(f"{name:10} {one:>8.3f} ms {many:>12.3f} ms {many / one:>7.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
