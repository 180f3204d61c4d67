"""Operating workflows: a page of 50 from the catalog at a small and a large store, and
the counts by status and kind.

For each backing the catalog is filled in bulk to ``SMALL`` workflows, timed, then to the
large size (SQLite and PostgreSQL 1,000,000, Redis 100,000, or as many as fit in
``FILL_SECONDS``: the row says which), timed again. A page reads one line of the catalog
(by tenant, by status, every tenant) newest first; the ratio large/small should stay
within 1.5x. The counts read the kept counts, every tenant's.

    python -m benchmarks operating
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from durably.stores.catalog import CatalogEntry, Cataloguing, Filter, page
from durably.stores.opening import Stores, open_stores
from durably.stores.status import WorkflowStatus

SMALL = 1_000
LARGE = {"sqlite": 1_000_000, "postgresql": 1_000_000, "redis": 100_000}
FILL_SECONDS = float(os.environ.get("DURABLY_BENCH_FILL_SECONDS", "110"))
TENANTS = 1_000
KINDS = ("triage", "notify", "bill", "crawl")
STATUSES = ("pending", "running", "blocked", "completed", "failed")
BASE_US = 1_780_000_000_000_000
READS = 40


def _row(n: int) -> tuple[str, str, str, None, int, str]:
    # One busy tenant holds every tenth workflow: its pages are full at every size.
    tenant = "t0000" if n % 10 == 0 else f"t{n % TENANTS:04d}"
    key = f"durably:t{len(tenant)}:{tenant}:wf-{n:08d}"
    return key, tenant, KINDS[n % len(KINDS)], None, BASE_US + n * 1000, STATUSES[n % 5]


async def _fill_sqlite(stores: Stores, start: int, stop: int) -> None:
    rows = [_row(n) for n in range(start, stop)]
    await stores.database.transaction(  # type: ignore[attr-defined]
        lambda tx: tx.cursor().executemany(
            "INSERT INTO durably_workflow_catalog VALUES (?, ?, ?, ?, ?, ?)", rows
        )
    )


async def _fill_postgres(stores: Stores, start: int, stop: int) -> None:
    from durably.postgres.executor import database_for

    columns = list(zip(*(_row(n) for n in range(start, stop)), strict=True))
    async with database_for(stores.database).session(120.0) as session:
        await session.fetch(
            "INSERT INTO durably_workflow_catalog (workflow, tenant, kind, parent, created, "
            "status) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], "
            "$5::bigint[], $6::text[])",
            *(list(column) for column in columns),
        )


async def _fill_redis(stores: Stores, start: int, stop: int) -> None:
    catalog = stores.checkpointer._catalog  # type: ignore[attr-defined]
    gate = asyncio.Semaphore(32)

    async def enter(n: int) -> None:
        key, tenant, kind, _, created, status = _row(n)
        async with gate:
            await catalog.enter(key, CatalogEntry(tenant, kind, created), WorkflowStatus(status))

    await asyncio.gather(*(enter(n) for n in range(start, stop)))


FILLERS: dict[str, tuple[Callable[[Stores, int, int], Awaitable[None]], int]] = {
    "sqlite": (_fill_sqlite, 50_000),
    "postgresql": (_fill_postgres, 10_000),
    "redis": (_fill_redis, 5_000),
}


async def _timed(read: Callable[[], Awaitable[Any]]) -> float:
    """Median milliseconds of ``READS`` calls (after one warm-up)."""
    await read()
    times = []
    for _ in range(READS):
        started = time.perf_counter()
        await read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def _measure(store: Cataloguing) -> dict[str, float]:
    """Page-of-50 and counts timings (ms) at the store's current size."""
    middle = "t0000"
    shapes = {
        "page by tenant": Filter(tenant=middle),
        "page by status": Filter(status=WorkflowStatus.BLOCKED),
        "page of every tenant": Filter(),
        "page by tenant+kind": Filter(tenant=middle, kind=KINDS[2]),
    }
    found = {
        name: await _timed(lambda s=selection: page(store, s, limit=50))  # type: ignore[misc]
        for name, selection in shapes.items()
    }
    found["counts by status and kind"] = await _timed(lambda: store.tally(None))
    return found


async def _backing(name: str, dsn: str) -> None:
    stores = await open_stores(dsn, create=True)
    try:
        await stores.migrate()
        store = stores.checkpointer
        assert isinstance(store, Cataloguing)
        fill, batch = FILLERS[name]
        await fill(stores, 0, SMALL)
        small = await _measure(store)
        filled = SMALL
        started = time.perf_counter()
        while filled < LARGE[name] and time.perf_counter() - started < FILL_SECONDS:
            upto = min(LARGE[name], filled + batch)
            await fill(stores, filled, upto)
            filled = upto
        seconds = time.perf_counter() - started
        large = await _measure(store)
        print(f"{name}: {filled:,} workflows filled in {seconds:.0f} s (target {LARGE[name]:,})")
        print(f"  {'read':28} {SMALL:>9,} {filled:>11,}  ratio")
        for read, at_small in small.items():
            at_large = large[read]
            print(f"  {read:28} {at_small:8.2f}ms {at_large:10.2f}ms  {at_large / at_small:4.2f}x")
    finally:
        await stores.close()


def _postgres_dsn() -> tuple[str, Callable[[], None]]:
    import psycopg

    admin_dsn = os.environ.get(
        "DURABLY_BENCH_POSTGRES_DSN", "postgresql://root@127.0.0.1:5432/postgres"
    )
    name = f"durably_bench_ops_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return admin_dsn.rsplit("/", 1)[0] + f"/{name}", drop


def main() -> None:
    """Print the rows of every backing reachable."""
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_backing("sqlite", f"sqlite:///{Path(directory) / 'ops.db'}"))
    try:
        dsn, drop = _postgres_dsn()
    except Exception as exc:  # the server is optional here
        print(f"postgresql: skipped ({type(exc).__name__})")
    else:
        try:
            asyncio.run(_backing("postgresql", dsn))
        finally:
            drop()
    from benchmarks.redis import server

    with server() as url:
        asyncio.run(_backing("redis", url))


if __name__ == "__main__":
    main()
