"""Operating workflows: a page of 50 from the catalog at a small and a large store, and
the counts by status and kind.

For each backing two catalogs are filled in bulk: one to ``SMALL`` workflows, the other to
the large size (SQLite and PostgreSQL 1,000,000, Redis 100,000, or as many as fit in
``FILL_SECONDS``: the row says which). Both are then settled as a store grown over time
would be (SQLite checkpointed, PostgreSQL vacuumed and analyzed) and read in alternating
slices, so the load of a shared machine weighs on both sides alike. A page reads one line
of the catalog newest first (by each filter, a created range, after a random cursor); the
ratio large/small should stay within 1.5x. The counts read the kept counts, every
tenant's. The random-cursor row reads rows no cache kept: at the large size it measures
the store's cache, not the index.

    python -m benchmarks operating
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from durably.stores.catalog import CatalogEntry, Cataloguing, Filter, Mark, Page, page
from durably.stores.opening import Stores, open_stores
from durably.stores.status import WorkflowStatus

SMALL = 1_000
LARGE = {"sqlite": 1_000_000, "postgresql": 1_000_000, "redis": 100_000}
FILL_SECONDS = float(os.environ.get("DURABLY_BENCH_FILL_SECONDS", "110"))
BACKINGS = os.environ.get("DURABLY_BENCH_BACKINGS", "sqlite,postgresql,redis").split(",")
TENANTS = 1_000
KINDS = ("triage", "notify", "bill", "crawl")
STATUSES = ("pending", "running", "blocked", "completed", "failed")
BASE_US = 1_780_000_000_000_000
ROUNDS = 20
SLICE = 10


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


async def _settle_sqlite(stores: Stores) -> None:
    # What the automatic checkpoints of a store grown over time have done: a bulk fill
    # leaves its last pages in the write-ahead log.
    with sqlite3.connect(stores.database.path) as raw:  # type: ignore[attr-defined]
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def _settle_postgres(stores: Stores) -> None:
    # What autovacuum does to a table grown over time: a bulk fill leaves it without
    # statistics and its counters with dead row versions.
    from durably.postgres.executor import database_for

    async with database_for(stores.database).session(300.0) as session:
        for table in ("durably_workflow_catalog", "durably_workflow_counts"):
            await session.fetch(f"VACUUM ANALYZE {table}")


async def _settle_redis(stores: Stores) -> None:
    pass


async def _fill_redis(stores: Stores, start: int, stop: int) -> None:
    catalog = stores.checkpointer._catalog  # type: ignore[attr-defined]
    gate = asyncio.Semaphore(32)

    async def enter(n: int) -> None:
        key, tenant, kind, _, created, status = _row(n)
        async with gate:
            await catalog.enter(key, CatalogEntry(tenant, kind, created), WorkflowStatus(status))

    await asyncio.gather(*(enter(n) for n in range(start, stop)))


SETTLE: dict[str, Callable[[Stores], Awaitable[None]]] = {
    "sqlite": _settle_sqlite,
    "postgresql": _settle_postgres,
    "redis": _settle_redis,
}

FILLERS: dict[str, tuple[Callable[[Stores, int, int], Awaitable[None]], int]] = {
    "sqlite": (_fill_sqlite, 50_000),
    "postgresql": (_fill_postgres, 10_000),
    "redis": (_fill_redis, 5_000),
}


def _shapes(filled: int) -> dict[str, tuple[Filter, Mark | None]]:
    """The pages read, each a filter and where it starts, at a store of ``filled``."""
    middle = BASE_US + filled // 2 * 1000
    deep = (BASE_US + filled // 3 * 1000, "")  # replaced by a random one per read
    busy = "t0000"
    return {
        "page of every tenant": (Filter(), None),
        "page by tenant": (Filter(tenant=busy), None),
        "page by kind": (Filter(kind=KINDS[2]), None),
        "page by status": (Filter(status=WorkflowStatus.BLOCKED), None),
        "page by tenant+kind": (Filter(tenant=busy, kind=KINDS[2]), None),
        "page by tenant+status": (Filter(tenant=busy, status=WorkflowStatus.PENDING), None),
        "page by kind+status": (Filter(kind=KINDS[2], status=WorkflowStatus.PENDING), None),
        "page by all three (checked)": (
            Filter(tenant=busy, kind=KINDS[2], status=WorkflowStatus.PENDING),
            None,
        ),
        "page in a created range": (Filter(since_us=middle - 200_000, until_us=middle), None),
        "page after a random cursor": (Filter(), deep),
    }


def _reads(store: Cataloguing, filled: int) -> dict[str, Callable[[], Awaitable[Any]]]:
    reads: dict[str, Callable[[], Awaitable[Any]]] = {}
    for name, (selection, after) in _shapes(filled).items():
        if after is None:
            reads[name] = functools.partial(page, store, selection, limit=50)
        else:
            reads[name] = functools.partial(_anywhere, store, selection, filled)
    reads["counts by status and kind"] = functools.partial(store.tally, None)
    return reads


async def _anywhere(store: Cataloguing, selection: Filter, filled: int) -> Page:
    """A page after a fresh random place each read: rows a cache has likely not kept."""
    mark = (BASE_US + random.randrange(filled) * 1000, "")
    return await page(store, selection, limit=50, after=mark)


async def _compare(
    small: Cataloguing, large: Cataloguing, filled: int
) -> dict[str, tuple[float, float]]:
    """Median milliseconds of each read on both stores, read in alternating slices so the
    load of a shared machine falls on both sides alike."""
    at_small = _reads(small, SMALL)
    at_large = _reads(large, filled)
    for _ in range(3):  # warm-up: the first reads after the fill load the statements
        for name in at_small:
            await at_small[name]()
            await at_large[name]()
    found: dict[str, tuple[float, float]] = {}
    for name in at_small:
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(ROUNDS):
            for side, read in ((0, at_small[name]), (1, at_large[name])):
                for _ in range(SLICE):
                    started = time.perf_counter()
                    await read()
                    times[side].append((time.perf_counter() - started) * 1000)
        found[name] = (statistics.median(times[0]), statistics.median(times[1]))
    return found


async def _backing(name: str, dsns: tuple[str, str]) -> None:
    small_stores = await open_stores(dsns[0], create=True)
    large_stores = await open_stores(dsns[1], create=True)
    try:
        for stores in (small_stores, large_stores):
            await stores.migrate()
        fill, batch = FILLERS[name]
        await fill(small_stores, 0, SMALL)
        filled = 0
        started = time.perf_counter()
        while filled < LARGE[name] and time.perf_counter() - started < FILL_SECONDS:
            upto = min(LARGE[name], filled + batch)
            await fill(large_stores, filled, upto)
            filled = upto
        seconds = time.perf_counter() - started
        for stores in (small_stores, large_stores):
            await SETTLE[name](stores)
        small, large = small_stores.checkpointer, large_stores.checkpointer
        assert isinstance(small, Cataloguing)
        assert isinstance(large, Cataloguing)
        found = await _compare(small, large, filled)
        print(f"{name}: {filled:,} workflows filled in {seconds:.0f} s (target {LARGE[name]:,})")
        print(f"  {'read':30} {SMALL:>9,} {filled:>11,}  ratio")
        for read, (at_small, at_large) in found.items():
            print(f"  {read:30} {at_small:8.2f}ms {at_large:10.2f}ms  {at_large / at_small:4.2f}x")
    finally:
        await small_stores.close()
        await large_stores.close()


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
    """Print the rows of every backing reachable (of ``DURABLY_BENCH_BACKINGS``)."""
    if "sqlite" in BACKINGS:
        with tempfile.TemporaryDirectory() as directory:
            files = (Path(directory) / "small.db", Path(directory) / "large.db")
            asyncio.run(_backing("sqlite", (f"sqlite:///{files[0]}", f"sqlite:///{files[1]}")))
    if "postgresql" in BACKINGS:
        _postgres()
    if "redis" in BACKINGS:
        from benchmarks.redis import server

        with server() as url:
            base = url.rsplit("/", 1)[0] if url.count("/") > 2 else url
            asyncio.run(_backing("redis", (f"{base}/1", f"{base}/2")))


def _postgres() -> None:
    try:
        small, drop_small = _postgres_dsn()
        large, drop_large = _postgres_dsn()
    except Exception as exc:  # the server is optional here
        print(f"postgresql: skipped ({type(exc).__name__})")
    else:
        try:
            asyncio.run(_backing("postgresql", (small, large)))
        finally:
            drop_small()
            drop_large()


if __name__ == "__main__":
    main()
