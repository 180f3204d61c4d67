"""Enqueue skips creating a tenant's turn row it has seen committed, and only then: a turn
row created inside a transaction that rolled back is created again by the next enqueue."""

from __future__ import annotations

import pytest

from durably.clock import ManualClock
from durably.postgres import PostgresWorkQueue
from durably.postgres.executor import database_for
from durably.work import WorkItem
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres


async def test_items_of_a_tenant_seen_before_are_still_claimed_in_rotation(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, clock=ManualClock(), tables=tables))
    for n in range(3):
        for tenant in ("a", "b"):
            await queue.enqueue(WorkItem(id=f"{tenant}{n}", tenant=tenant))
    taken = []
    while (item := await queue.claim(worker="w")) is not None:
        taken.append(item.id)
    assert taken == ["a0", "b0", "a1", "b1", "a2", "b2"]


async def test_a_turn_row_rolled_back_with_its_transaction_is_created_by_the_next_enqueue(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, clock=ManualClock(), tables=tables))

    async def enqueue_then_fail() -> None:
        async with database_for(pg_stores.pool).session(5.0) as session, session.transaction():
            connection = session.connection  # type: ignore[attr-defined]
            await queue.bound(connection).enqueue(WorkItem(id="lost", tenant="fresh"))
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError, match="rolled back"):
        await enqueue_then_fail()
    await queue.enqueue(WorkItem(id="kept", tenant="fresh"))
    item = await queue.claim(worker="w")
    assert item is not None
    assert (item.tenant, item.id) == ("fresh", "kept")


async def test_a_bound_enqueue_of_a_tenant_seen_before_commits_with_its_transaction(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, clock=ManualClock(), tables=tables))
    await queue.enqueue(WorkItem(id="first", tenant="t"))
    async with database_for(pg_stores.pool).session(5.0) as session, session.transaction():
        connection = session.connection  # type: ignore[attr-defined]
        await queue.bound(connection).enqueue(WorkItem(id="second", tenant="t"))
    taken = [await queue.claim(worker="w") for _ in range(2)]
    assert {item.id for item in taken if item is not None} == {"first", "second"}


async def test_a_duplicate_of_a_tenant_seen_before_is_returned_and_counted(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, clock=ManualClock(), tables=tables))
    first = await queue.enqueue(WorkItem(id="a", tenant="t", dedupe_key="k", payload={"v": "1"}))
    same_id = await queue.enqueue(WorkItem(id="a", tenant="t", payload={"v": "2"}))
    same_key = await queue.enqueue(WorkItem(id="b", tenant="t", dedupe_key="k"))
    assert same_id.payload == first.payload
    assert same_key.id == "a"
    stats = await queue.stats()
    assert (stats.depth, stats.duplicates_suppressed) == (1, 2)
    # The queue still works after the refused inserts (no transaction left aborted).
    await queue.enqueue(WorkItem(id="c", tenant="t"))
    assert (await queue.stats()).depth == 2
