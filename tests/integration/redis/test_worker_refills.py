"""A `Worker` over Redis claims with its completions (`complete_and_claim`): every item runs
once, the server never holds more items for the worker than its concurrency, and a stop
leaves nothing held."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durably import SystemClock, WorkItem
from durably.engine.worker import Worker
from durably.redis import RedisWorkQueue
from tests.redis_service import namespace_for

pytestmark = pytest.mark.redis


async def _drained(client: Any, count: int, concurrency: int, stop_after: int | None) -> Any:
    queue = RedisWorkQueue(client, clock=SystemClock(), key_prefix=namespace_for(client))
    for n in range(count):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n % 4}"))
    handled: list[str] = []
    held: list[int] = []
    enough = asyncio.Event()

    async def handler(item: WorkItem) -> None:
        # What the server says is claimed, read while this item is held.
        held.append((await queue.stats()).claimed)
        handled.append(item.id)
        if len(handled) == (stop_after or count):
            enough.set()

    worker = Worker(name="refiller", grace_seconds=5.0)
    worker.handle(queue, handler, concurrency=concurrency)
    serving = asyncio.create_task(worker.run(install_signal_handlers=False))
    await asyncio.wait_for(enough.wait(), 60)
    worker.stop()
    await serving
    return queue, handled, held


async def test_a_worker_refilling_slots_with_its_completions_runs_each_item_once(
    any_redis: Any,
) -> None:
    queue, handled, held = await _drained(any_redis, 300, 6, None)
    assert sorted(handled) == sorted(f"i{n}" for n in range(300))
    assert 1 <= max(held) <= 6
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (0, 0)


async def test_a_stopped_worker_holds_nothing_and_loses_nothing(any_redis: Any) -> None:
    queue, handled, held = await _drained(any_redis, 300, 6, 50)
    assert len(handled) == len(set(handled)) >= 50
    assert max(held) <= 6
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (300 - len(handled), 0)
