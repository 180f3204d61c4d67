"""The rotation each backing keeps so a claim reads one tenant, not all of them: a tenant
whose items are all delayed waits apart and is promoted in its turn when one comes due, and
the counters `stats` reads stay exact through every operation. On every backing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from durably import ManualClock, WorkItem
from durably.memory import MemoryWorkQueue
from durably.postgres import PostgresWorkQueue
from durably.redis import RedisWorkQueue
from durably.sqlite import SqliteWorkQueue, connect
from durably.stores import QueuePolicy, WorkQueue
from durably.testing.queue.order import drain
from tests.pg_service import Stores, close_pool, open_pool, postgres_dsn
from tests.redis_service import connect as redis_client
from tests.redis_service import unique_namespace

__all__ = ["postgres_dsn"]

Make = Callable[[ManualClock, QueuePolicy], Awaitable[WorkQueue]]
BACKINGS = [
    pytest.param("memory"),
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


@pytest.fixture(params=BACKINGS)
async def make_queue(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Make]:
    closers: list[Callable[[], Awaitable[object]]] = []
    backing = request.param
    if backing == "memory":

        async def make(clock: ManualClock, policy: QueuePolicy) -> WorkQueue:
            return MemoryWorkQueue(clock, policy)

    elif backing == "sqlite":

        async def make(clock: ManualClock, policy: QueuePolicy) -> WorkQueue:
            database = await connect(tmp_path / "work.db")
            closers.append(database.close)
            return SqliteWorkQueue(database, clock=clock, policy=policy)

    elif backing == "postgres":
        pool = await open_pool("psycopg", request.getfixturevalue("postgres_dsn"))
        stores = Stores(pool, "psycopg")
        closers.extend([lambda: close_pool(pool), stores.close])

        async def make(clock: ManualClock, policy: QueuePolicy) -> WorkQueue:
            tables = await stores.tables()
            queue = PostgresWorkQueue(pool, clock=clock, policy=policy, tables=tables)
            return stores.track(queue)  # type: ignore[no-any-return]

    else:
        client = await redis_client("standalone")
        closers.append(client.aclose)

        async def make(clock: ManualClock, policy: QueuePolicy) -> WorkQueue:
            return RedisWorkQueue(client, clock=clock, policy=policy, key_prefix=unique_namespace())

    try:
        yield make
    finally:
        for close in reversed(closers):
            await close()


async def test_a_tenant_whose_only_item_comes_due_later_is_promoted_in_turn_order(
    make_queue: Make,
) -> None:
    # a's only item waits out a delay while b and c are served; once due, a goes by the
    # turn it already had (before b and c), and d, never served, before every served one.
    clock = ManualClock(1000.0)
    queue = await make_queue(clock, QueuePolicy())
    for tenant, item_id in (("a", "a0"), ("b", "b0"), ("c", "c0")):
        await queue.enqueue(WorkItem(id=item_id, tenant=tenant, queue="q"))
    for item_id in ("b1", "b2", "c1", "c2"):
        await queue.enqueue(WorkItem(id=item_id, tenant=item_id[0], queue="q"))
    await queue.enqueue(WorkItem(id="a1", tenant="a", queue="q", available_at=1010.0))
    await queue.enqueue(WorkItem(id="d0", tenant="d", queue="q", available_at=1005.0))
    first = await drain(queue, "q", 4)
    assert first == [("a", "a0"), ("b", "b0"), ("c", "c0"), ("b", "b1")]
    clock.advance(11)
    taken = await drain(queue, "q", 5)
    assert taken == [("d", "d0"), ("a", "a1"), ("c", "c1"), ("b", "b2"), ("c", "c2")]
    assert await queue.claim(worker="w", queue="q") is None


async def test_a_requeued_item_older_than_its_tenants_others_sets_the_tie_break(
    make_queue: Make,
) -> None:
    # Never-served tenants tie at turn 0 and go by their oldest item; an item enqueued with
    # an earlier availability than the tenant's others becomes that oldest item.
    clock = ManualClock(1000.0)
    queue = await make_queue(clock, QueuePolicy())
    await queue.enqueue(WorkItem(id="a0", tenant="a", queue="q"))
    clock.advance(1)
    await queue.enqueue(WorkItem(id="b0", tenant="b", queue="q"))
    await queue.enqueue(WorkItem(id="b-old", tenant="b", queue="q", available_at=990.0))
    clock.advance(1)
    assert await drain(queue, "q", 3) == [("b", "b-old"), ("a", "a0"), ("b", "b0")]


async def test_stats_counters_stay_exact_through_every_operation(make_queue: Make) -> None:
    clock = ManualClock(1000.0)
    policy = QueuePolicy(lease_seconds=10, max_attempts=2, backoff_seconds=5)
    queue = await make_queue(clock, policy)

    async def counts() -> tuple[int, int, int]:
        stats = await queue.stats(queue="q")
        return stats.depth, stats.claimed, stats.dead_lettered

    for n in range(6):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n % 3}", queue="q"))
    await queue.enqueue(WorkItem(id="late", tenant="t9", queue="q", available_at=2000.0))
    await queue.enqueue(WorkItem(id="i0", tenant="t0", queue="q"))  # a duplicate
    assert await counts() == (7, 0, 0)
    held = [await queue.claim(worker="w", queue="q") for _ in range(4)]
    assert await counts() == (3, 4, 0)
    first, second, third, fourth = (item for item in held if item is not None)
    await queue.complete(first.id, tenant=first.tenant, worker="w")
    await queue.fail(second.id, tenant=second.tenant, worker="w", error="again")
    await queue.fail(third.id, tenant=third.tenant, worker="w", error="no", retryable=False)
    assert await counts() == (4, 1, 1)
    clock.advance(11)  # the fourth's lease lapses
    assert len(await queue.reap()) == 1
    assert await counts() == (5, 0, 1)
    again = await queue.claim(worker="w2", queue="q")
    assert again is not None
    assert len(await queue.adopt(worker="w2")) == 1
    assert await counts() == (5, 0, 1)
    assert (await queue.stats(queue="q")).oldest_age_seconds == pytest.approx(11.0)
    while (item := await queue.claim(worker="w", queue="q")) is not None:
        await queue.complete(item.id, tenant=item.tenant, worker="w")
    assert await counts() == (2, 0, 1)  # the late one, and the reaped one's backoff
    assert (await queue.stats(queue="q")).oldest_age_seconds == 0.0
    clock.advance(policy.backoff_for(1))
    assert await drain(queue, "q", 1) == [(fourth.tenant, fourth.id)]
    # A dead letter's id taken by a new item: the dead letter is gone with it.
    await queue.enqueue(WorkItem(id=third.id, tenant=third.tenant, queue="q"))
    assert await counts() == (2, 0, 0)


async def test_tenants_tied_at_turn_0_are_told_apart_by_microseconds_of_availability(
    make_queue: Make,
) -> None:
    # At a present-day clock (ten digits of seconds) the oldest item decides the tie to the
    # microsecond: a later-enqueued tenant whose item is due 10 µs earlier goes first.
    clock = ManualClock(1_700_000_000.0)
    queue = await make_queue(clock, QueuePolicy())
    await queue.enqueue(WorkItem(id="a0", tenant="a", queue="q", available_at=1_699_999_999.00002))
    await queue.enqueue(WorkItem(id="b0", tenant="b", queue="q", available_at=1_699_999_999.00001))
    assert await drain(queue, "q", 2) == [("b", "b0"), ("a", "a0")]
