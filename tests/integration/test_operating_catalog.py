"""The workflow catalog on every backing: paging each filter, page by page, sees each
workflow once, newest first; statuses move workflows between lines; counts are exact;
discard and sweep take workflows out."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from durably.errors import InvalidInputError
from durably.stores.catalog import (
    MAX_CATALOG_BATCH,
    SCAN_PER_PAGE,
    CatalogEntry,
    Cataloguing,
    Filter,
    Line,
    page,
)
from durably.stores.opening import Stores, open_stores
from durably.stores.status import WorkflowStatus
from durably.stores.throughput import Minute
from durably.stores.workflows import finish_workflow
from tests.pg_service import create_database
from tests.redis_service import durable_server

REDIS_DB = 11
TENANTS = 100
WORKFLOWS = 5000
KINDS = ("triage", "notify", "bill")
BASE_US = 1_780_000_000_000_000


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "memory":
        dsn = "memory://"
    elif request.param == "sqlite":
        dsn = f"sqlite:///{tmp_path / 'catalog.db'}"
    elif request.param == "postgresql":
        dsn = create_database()
    else:
        redis = pytest.importorskip("redis.asyncio")
        dsn = f"{durable_server().url.rsplit('/', 1)[0]}/{REDIS_DB}"
        client = redis.from_url(dsn)
        try:
            await client.flushdb()
        finally:
            await client.aclose()
    opened = await open_stores(dsn, create=True)
    if request.param == "postgresql":
        await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


def _key(n: int) -> str:
    return f"durably:t{len(_tenant(n))}:{_tenant(n)}:wf-{n:05d}"


def _tenant(n: int) -> str:
    return f"tenant-{n % TENANTS:03d}"


def _entry(n: int) -> CatalogEntry:
    # Every 7th shares its creation time with its neighbour: ties are broken by key.
    created = BASE_US + (n - n % 7 if n % 7 == 1 else n) * 1000
    parent = _key(n - n % 10) if n % 10 else None
    return CatalogEntry(_tenant(n), KINDS[n % 3], created, parent)


async def _fill(stores: Stores, count: int = WORKFLOWS) -> Cataloguing:
    """Catalogue ``count`` workflows: in one INSERT on the SQL backings (their triggers
    count them as they land), one pipeline of the catalog's script on Redis."""
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Cataloguing)
    if stores.backing == "postgresql":
        await _bulk_postgres(stores, count)
    elif stores.backing == "sqlite":
        await _bulk_sqlite(stores, count)
    elif stores.backing == "redis":
        await _bulk_redis(stores, count)
    else:
        for n in range(count):
            await checkpointer.catalog(_key(n), _entry(n))
    return checkpointer


async def _bulk_sqlite(stores: Stores, count: int) -> None:
    from durably.sqlite.connection import Database

    database = stores.database
    assert isinstance(database, Database)
    rows = [(_key(n), *_fields(n)) for n in range(count)]
    await database.transaction(
        lambda tx: tx.cursor().executemany(
            "INSERT INTO durably_workflow_catalog (workflow, tenant, kind, parent, created, "
            "status) VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
    )


async def _bulk_redis(stores: Stores, count: int) -> None:
    from durably.redis.catalog import RedisCatalog

    catalog = stores.checkpointer._catalog  # type: ignore[attr-defined]
    assert isinstance(catalog, RedisCatalog)
    gate = asyncio.Semaphore(8)

    async def enter(n: int) -> None:
        async with gate:
            await catalog.enter(_key(n), _entry(n), WorkflowStatus.PENDING)

    await asyncio.gather(*(enter(n) for n in range(count)))


async def _bulk_postgres(stores: Stores, count: int) -> None:
    from durably.postgres.executor import database_for

    rows = [(_key(n), *_fields(n)) for n in range(count)]
    async with database_for(stores.database).session(30.0) as session:
        await session.fetch(
            "INSERT INTO durably_workflow_catalog (workflow, tenant, kind, parent, created, status)"
            " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],"
            " $6::text[])",
            *(list(column) for column in zip(*rows, strict=True)),
        )


def _fields(n: int) -> tuple[str, str, str | None, int, str]:
    entry = _entry(n)
    return entry.tenant, entry.kind, entry.parent, entry.created_us, "pending"


async def _report(stores: Stores, chosen: dict[int, WorkflowStatus]) -> None:
    checkpointer = stores.checkpointer
    for n, status in chosen.items():
        holder = await checkpointer.claim(_key(n), 30, 30)
        assert holder is not None
        await checkpointer.set_status(holder, status)
        await checkpointer.release(holder)


async def _every_page(store: Cataloguing, selection: Filter, limit: int) -> list[str]:
    seen: list[str] = []
    after = None
    while True:
        found = await page(store, selection, limit=limit, after=after)
        assert len(found.rows) <= limit
        seen += [row.workflow for row in found.rows]
        if found.next is None:
            return seen
        after = found.next


def _order(n: int) -> tuple[int, str]:
    return (_entry(n).created_us, _key(n))


async def test_paging_each_filter_sees_each_workflow_once_newest_first(stores: Stores) -> None:
    store = await _fill(stores)
    rng = random.Random(7)
    statuses = {
        n: rng.choice([WorkflowStatus.RUNNING, WorkflowStatus.COMPLETED, WorkflowStatus.FAILED])
        for n in rng.sample(range(WORKFLOWS), 150)
    }
    await _report(stores, statuses)

    def status_of(n: int) -> WorkflowStatus:
        return statuses.get(n, WorkflowStatus.PENDING)

    since = BASE_US + 1000 * 1000
    until = BASE_US + 4000 * 1000
    cases: list[tuple[Filter, object]] = [
        (Filter(), lambda n: True),
        (Filter(tenant=_tenant(42)), lambda n: _tenant(n) == _tenant(42)),
        (Filter(kind="bill"), lambda n: KINDS[n % 3] == "bill"),
        (Filter(status=WorkflowStatus.FAILED), lambda n: status_of(n) is WorkflowStatus.FAILED),
        (
            Filter(tenant=_tenant(3), kind="triage"),
            lambda n: _tenant(n) == _tenant(3) and KINDS[n % 3] == "triage",
        ),
        (
            Filter(tenant=_tenant(5), status=WorkflowStatus.PENDING),
            lambda n: _tenant(n) == _tenant(5) and status_of(n) is WorkflowStatus.PENDING,
        ),
        (
            Filter(kind="notify", status=WorkflowStatus.RUNNING),
            lambda n: KINDS[n % 3] == "notify" and status_of(n) is WorkflowStatus.RUNNING,
        ),
        (
            # No line answers a tenant, a kind and a status: pages may come short, never wrong.
            Filter(tenant=_tenant(4), kind="notify", status=WorkflowStatus.PENDING),
            lambda n: (
                _tenant(n) == _tenant(4)
                and KINDS[n % 3] == "notify"
                and status_of(n) is WorkflowStatus.PENDING
            ),
        ),
        (
            Filter(since_us=since, until_us=until),
            lambda n: since <= _entry(n).created_us < until,
        ),
        (Filter(parent=_key(1230)), lambda n: _entry(n).parent == _key(1230)),
    ]
    for selection, wanted in cases:
        expected = sorted(
            (n for n in range(WORKFLOWS) if wanted(n)),  # type: ignore[operator]
            key=_order,
            reverse=True,
        )
        limit = 50 if selection != Filter() else 700
        seen = await _every_page(store, selection, limit)
        assert seen == [_key(n) for n in expected], selection


async def test_a_page_reads_a_bounded_stretch_and_says_where_to_go_on(stores: Stores) -> None:
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Cataloguing)
    # The crowd's oldest pending workflow is the only one of its kind: the crowd's pending
    # line (which its tenant, a kind and a status read) holds it behind SCAN_PER_PAGE others.
    count = SCAN_PER_PAGE + 300
    for start in range(0, count, MAX_CATALOG_BATCH):
        await checkpointer.catalog_many(
            [
                (f"crowd-{n}", CatalogEntry("crowd", "triage", BASE_US + n))
                for n in range(start, min(start + MAX_CATALOG_BATCH, count))
            ]
        )
    await checkpointer.catalog("rare", CatalogEntry("crowd", "rare", BASE_US - 1))
    # A kind and a status alone are a line of their own: the first page finds it.
    alone = await page(checkpointer, Filter(kind="rare", status=WorkflowStatus.PENDING), limit=10)
    assert [row.workflow for row in alone.rows] == ["rare"]
    selection = Filter(tenant="crowd", kind="rare", status=WorkflowStatus.PENDING)
    first = await page(checkpointer, selection, limit=10)
    assert first.rows == []
    assert first.next is not None
    assert await _every_page(checkpointer, selection, 10) == ["rare"]


async def test_statuses_move_workflows_between_lines_and_counts_stay_exact(
    stores: Stores,
) -> None:
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Cataloguing)
    for n in range(30):
        await checkpointer.catalog(_key(n), _entry(n))
    await checkpointer.catalog(_key(0), CatalogEntry("other", "other", 1))  # kept as it was
    holder = await checkpointer.claim(_key(0), 30, 30)
    assert holder is not None
    await checkpointer.set_status(holder, WorkflowStatus.RUNNING)
    await checkpointer.set_status(holder, WorkflowStatus.SLEEPING)
    assert [
        r.workflow for r in await checkpointer.listed(Line(status=WorkflowStatus.SLEEPING))
    ] == [_key(0)]
    assert await checkpointer.listed(Line(status=WorkflowStatus.RUNNING)) == []
    tenant = _tenant(0)
    line = await checkpointer.listed(Line(tenant=tenant, status=WorkflowStatus.SLEEPING))
    assert [r.workflow for r in line] == [_key(0)]
    assert line[0].info is not None
    assert line[0].info.status is WorkflowStatus.SLEEPING
    await finish_workflow(checkpointer, holder, "durably:result", 1)
    await checkpointer.release(holder)
    # Of 30 workflows only the first is of tenant-000.
    assert await checkpointer.tally(tenant) == {(KINDS[0], WorkflowStatus.COMPLETED): 1}
    total = await checkpointer.tally()
    assert sum(total.values()) == 30
    assert total[(KINDS[0], WorkflowStatus.COMPLETED)] == 1
    # Discard takes a workflow out of every line and every count.
    await stores.durable("triage").delete(_key(3))
    assert sum((await checkpointer.tally()).values()) == 29
    assert _key(3) not in [r.workflow for r in await checkpointer.listed(Line(), limit=1000)]
    # The sweep too.
    swept = await checkpointer.sweep(finished_before=datetime.now(UTC) + timedelta(days=1))
    assert swept == 1
    assert sum((await checkpointer.tally()).values()) == 28
    assert await checkpointer.listed(Line(status=WorkflowStatus.COMPLETED)) == []


async def test_workflows_that_end_are_counted_once_in_their_kinds_minute(stores: Stores) -> None:
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Cataloguing)
    before = await checkpointer.finished_per_minute()
    for n in range(6):
        await checkpointer.catalog(_key(n), _entry(n))
    ends = {0: WorkflowStatus.COMPLETED, 1: WorkflowStatus.FAILED, 2: WorkflowStatus.RUNNING}
    ends |= {3: WorkflowStatus.COMPLETED, 4: WorkflowStatus.CANCELLED}
    await _report(stores, ends)
    holder = await checkpointer.claim(_key(5), 30, 30)
    assert holder is not None
    await finish_workflow(checkpointer, holder, "durably:result", 1)
    await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)  # reported again: once
    await checkpointer.release(holder)
    after = await checkpointer.finished_per_minute()

    def totals(found: dict[str, list[Minute]], kind: str) -> tuple[int, int]:
        minutes = found.get(kind, [])
        return sum(m.completed for m in minutes), sum(m.failed for m in minutes)

    # Kinds by n % 3: 0 and 3 triage, 1 and 4 notify, 2 and 5 bill.
    wanted = {"triage": (2, 0), "notify": (0, 1), "bill": (1, 0)}
    for kind, (completed, failed) in wanted.items():
        was = totals(before, kind)
        assert totals(after, kind) == (was[0] + completed, was[1] + failed), kind
    now = datetime.now(UTC).timestamp() // 60
    assert all(now - 15 < m.minute <= now for ms in after.values() for m in ms)


async def test_a_catalog_in_step_has_nothing_to_repair_and_a_bad_limit_is_refused(
    stores: Stores,
) -> None:
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Cataloguing)
    for n in range(4):
        await checkpointer.catalog(_key(n), _entry(n))
    await _report(stores, {0: WorkflowStatus.COMPLETED, 1: WorkflowStatus.SLEEPING})
    before = await checkpointer.tally()
    assert await checkpointer.repair_catalog(limit=100) == 0
    assert await checkpointer.tally() == before
    with pytest.raises(InvalidInputError, match="limit"):
        await checkpointer.repair_catalog(limit=0)


async def test_a_batch_enters_as_single_calls_do_and_bad_batches_write_nothing(
    stores: Stores,
) -> None:
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Cataloguing)
    await checkpointer.catalog(_key(0), _entry(0))
    await _report(stores, {1: WorkflowStatus.FAILED})  # reported before it is catalogued
    kept = CatalogEntry("other", "other", 5)
    for bad in ([(_key(2), kept)] * (MAX_CATALOG_BATCH + 1), [(_key(2), "entry")], "abc"):
        with pytest.raises(InvalidInputError):
            await checkpointer.catalog_many(bad)  # type: ignore[arg-type]
    assert await checkpointer.tally() == {(KINDS[0], WorkflowStatus.PENDING): 1}
    await checkpointer.catalog_many(
        [(_key(0), kept), (_key(1), _entry(1)), (_key(2), _entry(2)), (_key(2), kept)]
    )
    rows = await checkpointer.listed(Line(), limit=10)
    assert [(r.workflow, r.entry, r.status) for r in rows] == [
        (_key(2), _entry(2), WorkflowStatus.PENDING),  # of a key named twice, the first
        (_key(1), _entry(1), WorkflowStatus.FAILED),  # under the status it reported
        (_key(0), _entry(0), WorkflowStatus.PENDING),  # an entry already there is kept
    ]
    assert sum((await checkpointer.tally()).values()) == 3
    await checkpointer.catalog_many([])
