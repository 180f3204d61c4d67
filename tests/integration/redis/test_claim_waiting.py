"""`RedisWorkQueue.claim_waiting`: the doorbell wait and the claim in one round trip."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from durably import ManualClock, SystemClock, WorkItem, WorkState
from durably.engine.worker import Worker
from durably.errors import InvalidInputError, LeaseLostError
from durably.redis import RedisWorkQueue
from tests.redis_service import namespace_for

pytestmark = pytest.mark.redis


async def test_a_waiting_claim_takes_the_item_enqueued_meanwhile_within_milliseconds(
    any_redis: Any,
) -> None:
    queue = RedisWorkQueue(any_redis, clock=SystemClock(), key_prefix=namespace_for(any_redis))
    waiting = asyncio.create_task(queue.claim_waiting(worker="w1", queue="q", within=5.0))
    await asyncio.sleep(0.2)  # the claim is blocked on the doorbell
    sent = time.monotonic()
    await queue.enqueue(WorkItem(id="job", tenant="t", queue="q"))
    item = await asyncio.wait_for(waiting, timeout=5)
    assert time.monotonic() - sent < 0.1
    assert item is not None
    assert (item.id, item.state, item.worker) == ("job", WorkState.CLAIMED, "w1")
    # The claim is a real one: fenced and settled like any other.
    with pytest.raises(LeaseLostError):
        await queue.complete("job", tenant="t", worker="w2")
    done = await queue.complete("job", tenant="t", worker="w1")
    assert done.state is WorkState.COMPLETED


async def test_a_waiting_claim_claims_as_of_the_ring_when_its_clock_lags(any_redis: Any) -> None:
    # The waiter read its clock before it waited; the enqueuer's later reading made the
    # item due, and the claim must see it due (and lease it from then).
    waiter_clock, enqueuer_clock = ManualClock(1000.0), ManualClock(1000.0)
    namespace = namespace_for(any_redis)
    waiter = RedisWorkQueue(any_redis, clock=waiter_clock, key_prefix=namespace)
    enqueuer = RedisWorkQueue(any_redis, clock=enqueuer_clock, key_prefix=namespace)
    waiting = asyncio.create_task(waiter.claim_waiting(worker="w1", within=5.0))
    await asyncio.sleep(0.2)
    enqueuer_clock.advance(7.5)
    await enqueuer.enqueue(WorkItem(id="late", tenant="t"))
    item = await asyncio.wait_for(waiting, timeout=5)
    assert item is not None
    assert item.id == "late"
    assert item.claimed_at == 1007.5
    assert item.lease_expires_at == 1007.5 + waiter.policy.lease_for(None)


async def test_a_waiting_claim_returns_none_after_within_when_nothing_is_enqueued(
    any_redis: Any,
) -> None:
    queue = RedisWorkQueue(any_redis, clock=SystemClock(), key_prefix=namespace_for(any_redis))
    began = time.monotonic()
    assert await queue.claim_waiting(worker="w1", within=0.3) is None
    waited = time.monotonic() - began
    assert 0.25 <= waited < 2.0
    assert await queue.claim_waiting(worker="w1", within=0) is None


async def test_a_waiting_claim_takes_a_due_item_at_once_and_leaves_a_delayed_one(
    any_redis: Any,
) -> None:
    clock = ManualClock(50.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=namespace_for(any_redis))
    await queue.enqueue(WorkItem(id="later", tenant="t", available_at=60.0))
    await queue.enqueue(WorkItem(id="now", tenant="t"))
    began = time.monotonic()
    first = await queue.claim_waiting(worker="w1", within=5.0)
    assert first is not None
    assert first.id == "now"
    assert time.monotonic() - began < 1.0
    assert await queue.claim_waiting(worker="w1", within=0.2) is None
    assert (await queue.stats()).depth == 1


async def test_waiting_claims_of_several_workers_each_take_one_item(any_redis: Any) -> None:
    queue = RedisWorkQueue(any_redis, clock=SystemClock(), key_prefix=namespace_for(any_redis))
    waiting = [
        asyncio.create_task(queue.claim_waiting(worker=f"w{n}", within=5.0)) for n in range(3)
    ]
    await asyncio.sleep(0.2)
    sent = time.monotonic()
    for n in range(3):
        await queue.enqueue(WorkItem(id=f"job-{n}", tenant=f"t{n}"))
    items = await asyncio.wait_for(asyncio.gather(*waiting), timeout=5)
    assert time.monotonic() - sent < 1.0
    assert sorted(item.id for item in items if item is not None) == ["job-0", "job-1", "job-2"]
    assert len({item.worker for item in items if item is not None}) == 3


async def test_a_waiting_claim_refuses_bad_arguments_before_io(any_redis: Any) -> None:
    queue = RedisWorkQueue(any_redis, clock=SystemClock(), key_prefix=namespace_for(any_redis))
    with pytest.raises(InvalidInputError):
        await queue.claim_waiting(worker="", within=1.0)
    with pytest.raises(InvalidInputError):
        await queue.claim_waiting(worker="w", queue="a\0b", within=1.0)
    with pytest.raises(InvalidInputError):
        await queue.claim_waiting(worker="w", within=-1.0)


async def test_a_worker_with_a_ten_second_poll_starts_an_enqueued_item_within_milliseconds(
    any_redis: Any,
) -> None:
    queue = RedisWorkQueue(any_redis, clock=SystemClock(), key_prefix=namespace_for(any_redis))
    started: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    async def handler(item: WorkItem) -> None:
        if not started.done():
            started.set_result(time.monotonic())

    worker = Worker(name="fast", poll_seconds=10.0, grace_seconds=1.0)
    worker.handle(queue, handler)
    running = asyncio.create_task(worker.run(install_signal_handlers=False))
    await asyncio.sleep(0.3)  # idle, waiting on the doorbell
    sent = time.monotonic()
    await queue.enqueue(WorkItem(id="job", tenant="t"))
    began = await asyncio.wait_for(started, timeout=5)
    assert began - sent < 0.2
    stopping = time.monotonic()
    worker.stop()
    await asyncio.wait_for(running, timeout=5)
    assert time.monotonic() - stopping < 2.0  # an idle waiting claim does not hold up stop
    assert (await queue.stats()).claimed == 0


async def test_a_worker_stopped_while_its_claim_waits_leaves_nothing_held(
    any_redis: Any, caplog: pytest.LogCaptureFixture
) -> None:
    queue = RedisWorkQueue(any_redis, clock=SystemClock(), key_prefix=namespace_for(any_redis))
    seen: list[str] = []

    async def handler(item: WorkItem) -> None:
        seen.append(item.id)

    worker = Worker(name="stopper", poll_seconds=10.0, grace_seconds=1.0)
    worker.handle(queue, handler)
    with caplog.at_level(logging.ERROR, logger="durably.worker"):
        running = asyncio.create_task(worker.run(install_signal_handlers=False))
        await asyncio.sleep(0.3)
        worker.stop()
        await asyncio.wait_for(running, timeout=5)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    await queue.enqueue(WorkItem(id="after", tenant="t"))
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (1, 0)
    assert seen == []
