"""`advance_tick` on every backing: the store moves a schedule's mark once per tick, for
one of many concurrent callers, and never back; a first call only takes the mark. With
the tick's item named by the tick, this is what makes a cron tick enqueue once however
many workers tick the schedule, and however one of them is cut short."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from durably.clock import ManualClock
from durably.engine import Schedule
from durably.engine.schedules import tick
from durably.errors import InvalidInputError
from durably.memory.queue import MemoryWorkQueue
from durably.sqlite import SqliteWorkQueue, connect
from tests.pg_service import Stores
from tests.redis_service import namespace_for

CALLERS = 8


async def _race(queue: Any, name: str, tick_at: float) -> list[tuple[bool, float | None]]:
    return list(await asyncio.gather(*(queue.advance_tick(name, tick_at) for _ in range(CALLERS))))


async def _check_marks(queue: Any) -> None:
    first = await _race(queue, "s", 60.0)
    assert sorted(first, key=str) == [(False, None)] * (CALLERS - 1) + [(True, None)]
    second = await _race(queue, "s", 120.0)
    assert sorted(second, key=str) == [(False, None)] * (CALLERS - 1) + [(True, 60.0)]
    assert await queue.advance_tick("s", 60.0) == (False, None)  # a lagging clock
    assert await queue.advance_tick("other", 60.0) == (True, None)  # marks are per name
    with pytest.raises(InvalidInputError, match="tick"):
        await queue.advance_tick("s", float("nan"))
    with pytest.raises(InvalidInputError, match="schedule"):
        await queue.advance_tick("", 1.0)


class _Killed(Exception):
    """A worker killed after it enqueued a tick's item, before it moved the mark."""


class _KilledBeforeTheMove:
    """``queue``, through a worker that dies at its move of a mark."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    async def advance_tick(self, name: str, tick_at: float) -> tuple[bool, float | None]:
        raise _Killed


async def _check_one_item_a_tick(queue: Any, clock: ManualClock) -> None:
    schedule = Schedule("minutely", "* * * * *", queue="cron")
    assert (
        await asyncio.gather(*(tick(queue, schedule, now=clock.now()) for _ in range(4)))
        == [None] * 4
    )
    clock.advance(60)
    due = schedule.latest_at_or_before(clock.now())
    fired = await asyncio.gather(*(tick(queue, schedule, now=clock.now()) for _ in range(4)))
    assert {item.id for item in fired if item is not None} == {schedule.tick_item(due).id}
    assert (await queue.stats(queue="cron")).depth == 1
    assert await tick(queue, schedule, now=clock.now()) is None  # the mark moved

    # Killed between its enqueue and its move, a worker leaves the tick's item queued and
    # the mark behind; the next round finds the item, and the one after has nothing to do.
    clock.advance(60)
    with pytest.raises(_Killed):
        await tick(_KilledBeforeTheMove(queue), schedule, now=clock.now())
    assert (await queue.stats(queue="cron")).depth == 2
    # The tick's item runs and finishes quickly, before that next round comes.
    for _ in range(2):
        held = await queue.claim(worker="w", queue="cron")
        assert held is not None
        await queue.complete(held.id, tenant=held.tenant, worker="w")
    again = await tick(queue, schedule, now=clock.now())
    assert again is not None
    assert again.id == schedule.tick_item(schedule.latest_at_or_before(clock.now())).id
    assert (await queue.stats(queue="cron")).depth == 0  # found finished, not queued again
    assert await tick(queue, schedule, now=clock.now()) is None


async def test_memory_moves_a_mark_once_a_tick() -> None:
    clock = ManualClock(6_000_000.0)
    await _check_marks(MemoryWorkQueue(clock))
    await _check_one_item_a_tick(MemoryWorkQueue(clock), clock)


async def test_sqlite_moves_a_mark_once_a_tick(tmp_path: Path) -> None:
    clock = ManualClock(6_000_000.0)
    db = await connect(tmp_path / "ticks.db")
    try:
        await _check_marks(SqliteWorkQueue(db, clock=clock))
    finally:
        await db.close()
    db = await connect(tmp_path / "items.db")
    try:
        await _check_one_item_a_tick(SqliteWorkQueue(db, clock=clock), clock)
    finally:
        await db.close()


@pytest.mark.postgres
async def test_postgres_moves_a_mark_once_a_tick(pg_stores: Stores) -> None:
    from durably.postgres import PostgresWorkQueue

    clock = ManualClock(6_000_000.0)
    queue = pg_stores.track(
        PostgresWorkQueue(pg_stores.pool, clock=clock, tables=await pg_stores.tables())
    )
    await _check_marks(queue)
    other = pg_stores.track(
        PostgresWorkQueue(pg_stores.pool, clock=clock, tables=await pg_stores.tables())
    )
    await _check_one_item_a_tick(other, clock)


@pytest.fixture
def redis_queues(any_redis: Any) -> tuple[Any, ManualClock]:
    from durably.redis import RedisWorkQueue

    clock = ManualClock(6_000_000.0)

    def make() -> Any:
        return RedisWorkQueue(any_redis, clock=clock, key_prefix=namespace_for(any_redis))

    return make, clock


@pytest.mark.redis
async def test_redis_moves_a_mark_once_a_tick(redis_queues: Any) -> None:
    make, clock = redis_queues
    await _check_marks(make())
    await _check_one_item_a_tick(make(), clock)


async def test_a_claim_checked_queue_keeps_its_inner_queues_marks() -> None:
    from durably.claimcheck import ClaimCheckedQueue, ClaimCheckPolicy
    from durably.memory.claimcheck import MemoryClaimCheckStore

    clock = ManualClock(6_000_000.0)
    inner = MemoryWorkQueue(clock)
    queue = ClaimCheckedQueue(inner, ClaimCheckPolicy(MemoryClaimCheckStore()))
    await _check_one_item_a_tick(queue, clock)
    assert await inner.advance_tick("minutely", clock.now()) == (False, None)
