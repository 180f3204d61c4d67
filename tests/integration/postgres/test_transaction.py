"""`bound()`: a run and the work it queues commit together or not at all."""

from __future__ import annotations

from typing import Any

import pytest

from durably.clock import ManualClock
from durably.postgres import PostgresStateStore, PostgresWorkQueue
from durably.postgres.executor import database_for
from durably.stores.runs import RunRecord, StateKey
from durably.stores.work import WorkItem
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres


async def stores(pg_stores: Stores) -> tuple[PostgresStateStore, PostgresWorkQueue]:
    tables = await pg_stores.tables()
    clock = ManualClock()
    state = PostgresStateStore(pg_stores.pool, clock=clock, tables=tables)
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, clock=clock, tables=tables))
    return state, queue


def connection_of(session: Any) -> Any:
    return session.connection


async def test_a_failed_transaction_leaves_neither_the_run_nor_its_work(
    pg_stores: Stores,
) -> None:
    state, queue = await stores(pg_stores)
    run = RunRecord(run_id="r1", tenant="acme", agent_name="agent")

    async def both_then_fail() -> None:
        async with database_for(pg_stores.pool).session(5.0) as session, session.transaction():
            connection = connection_of(session)
            await state.bound(connection).put_run(run)
            await queue.bound(connection).enqueue(WorkItem(id="w1", tenant="acme"))
            raise RuntimeError("after both writes")

    with pytest.raises(RuntimeError, match="after both writes"):
        await both_then_fail()
    assert await state.get_run(StateKey(tenant="acme", id="r1")) is None
    assert (await queue.stats()).depth == 0


async def test_a_committed_transaction_keeps_both(pg_stores: Stores) -> None:
    state, queue = await stores(pg_stores)
    run = RunRecord(run_id="r1", tenant="acme", agent_name="agent")
    async with database_for(pg_stores.pool).session(5.0) as session, session.transaction():
        connection = connection_of(session)
        await state.bound(connection).put_run(run)
        await queue.bound(connection).enqueue(WorkItem(id="w1", tenant="acme"))
    stored = await state.get_run(StateKey(tenant="acme", id="r1"))
    assert stored is not None
    assert stored.version == 1
    claimed = await queue.claim(worker="w")
    assert claimed is not None
    assert claimed.id == "w1"


async def test_a_bound_store_retries_nothing_and_surfaces_the_error(pg_stores: Stores) -> None:
    state, _ = await stores(pg_stores)
    calls = 0

    class Failing:
        async def fetch(self, statement: str, *args: Any) -> list[Any]:
            nonlocal calls
            calls += 1
            raise ConnectionResetError("peer went away")

    with pytest.raises(Exception, match="unavailable"):
        await state.bound(Failing()).get_run(StateKey(tenant="t", id="r"))
    assert calls == 1


class Shim:
    """A caller's own executor: nothing but ``fetch(statement, *args)``."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def fetch(self, statement: str, *args: Any) -> list[Any]:
        return list(await self.session.fetch(statement, *args))


async def test_a_bound_bare_executor_tells_a_new_item_from_one_already_queued(
    pg_stores: Stores,
) -> None:
    # A bare executor answers rows only: the store must still learn whether its insert
    # wrote, or a duplicate would be reported as queued anew and go uncounted.
    _, queue = await stores(pg_stores)
    async with database_for(pg_stores.pool).session(5.0) as session, session.transaction():
        shim = queue.bound(Shim(session))
        first = await shim.enqueue(WorkItem(id="w1", tenant="acme", payload={"n": "1"}))
        again = await shim.enqueue(WorkItem(id="w1", tenant="acme", payload={"n": "2"}))
        keyed = await shim.enqueue(WorkItem(id="w2", tenant="acme", dedupe_key="k"))
        twin = await shim.enqueue(WorkItem(id="w3", tenant="acme", dedupe_key="k"))
    assert first.payload == {"n": "1"}
    assert again.payload == {"n": "1"}
    assert twin.id == keyed.id == "w2"
    stats = await queue.stats()
    assert stats.depth == 2
    assert stats.duplicates_suppressed == 2
