"""Redis enqueue order: items due at one instant go out in the order they were enqueued,
read from the producer (durably/redis/order.py), even while its clock stands or steps back."""

from __future__ import annotations

from typing import Any

import pytest

from durably import ManualClock, WorkItem
from durably.redis import RedisWorkQueue
from tests.redis_service import namespace_for

pytestmark = pytest.mark.redis


class SteppingBackClock:
    """A clock that reads one second earlier every time it is read."""

    def __init__(self, start: float) -> None:
        self._now = start

    def now(self) -> float:
        self._now -= 1.0
        return self._now

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("not used")


async def _drain(queue: RedisWorkQueue) -> list[str]:
    taken = []
    while (item := await queue.claim(worker="w", queue="q")) is not None:
        await queue.complete(item.id, tenant=item.tenant, worker="w")
        taken.append(item.id)
    return taken


async def test_items_due_at_one_instant_keep_enqueue_order_while_the_clock_steps_back(
    any_redis: Any,
) -> None:
    ns = namespace_for(any_redis)
    producer = RedisWorkQueue(any_redis, clock=SteppingBackClock(5000.0), key_prefix=ns)
    # Ids that sort the other way round: only the enqueue order can put them in this order.
    ids = ["z", "y", "m", "b", "a"]
    for item_id in ids:
        await producer.enqueue(WorkItem(id=item_id, tenant="t", queue="q", available_at=100.0))
    consumer = RedisWorkQueue(any_redis, clock=ManualClock(6000.0), key_prefix=ns)
    assert await _drain(consumer) == ids


async def test_two_queues_of_one_process_share_the_enqueue_order(any_redis: Any) -> None:
    ns = namespace_for(any_redis)
    clock = ManualClock(1000.0)
    first = RedisWorkQueue(any_redis, clock=clock, key_prefix=ns)
    second = RedisWorkQueue(any_redis, clock=clock, key_prefix=ns)
    for n, queue in enumerate([first, second, first, second]):
        await queue.enqueue(WorkItem(id=f"{9 - n}", tenant="t", queue="q"))
    assert await _drain(first) == ["9", "8", "7", "6"]
