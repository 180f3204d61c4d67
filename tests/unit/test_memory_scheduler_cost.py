"""The memory scheduler's hand-out and its wake of the due do not grow with the workflows
waiting: the same Python lines per ``next_ready`` + ``done`` at 100 and 20,000 ready
workflows and at 1 and 10,000 tenants, and per ``wake_due`` of a few due among 100 or
20,000 sleeping ones; and the heaps behind them stay bounded while one workflow is made
ready over and over.

Work is counted (as in ``test_memory_claim_cost``): a scan of every entry shows as Python
lines per entry, heap operations run in C; so the tenants' case is also timed, with the
bound every backing's cost test keeps (at most twice one tenant's)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from durably.memory import MemoryScheduler
from durably.stores.work import WorkPriority
from durably.stores.workflows import Scheduler
from tests.handout_cost import TENANTS, check_handout_ratio, fill_calls, named
from tests.line_count import lines_run

PAIRS = 100
COUNT_RATIO = 1.25
WOKEN = 5


async def _lines(work: Callable[[], Awaitable[None]]) -> int:
    with lines_run() as lines:
        await work()
    return lines[0]


async def _ready(count: int) -> MemoryScheduler:
    scheduler = MemoryScheduler()
    for n in range(count):
        await scheduler.make_ready(f"w{n}")
    return scheduler


async def _handouts(scheduler: MemoryScheduler) -> int:
    async def work() -> None:
        for _ in range(PAIRS):
            delivery = await scheduler.next_ready(0.0)
            assert delivery is not None
            await scheduler.done(delivery)

    return await _lines(work)


async def test_a_hand_out_costs_the_same_with_two_hundred_times_the_ready_workflows() -> None:
    small = await _handouts(await _ready(PAIRS))
    large = await _handouts(await _ready(20_000))
    assert large <= COUNT_RATIO * small, (small, large)


async def test_a_hand_out_costs_the_same_lines_at_one_and_at_ten_thousand_tenants() -> None:
    one, many = MemoryScheduler(), MemoryScheduler()
    await fill_calls(one, named(1, TENANTS))
    await fill_calls(many, named(TENANTS, TENANTS))
    small, large = await _handouts(one), await _handouts(many)
    assert large <= COUNT_RATIO * small, (small, large)


async def test_a_hand_out_at_ten_thousand_tenants_takes_at_most_twice_one_tenant() -> None:
    async def make(namespace: str) -> Scheduler:
        return MemoryScheduler(namespace=namespace)

    await check_handout_ratio(make)


async def _sleeping(count: int) -> MemoryScheduler:
    """``count`` sleeping workflows, ``WOKEN`` of them due at 1.0, the rest at 1000.0."""
    scheduler = await _ready(count)
    for n in range(count):
        delivery = await scheduler.next_ready(0.0)
        assert delivery is not None
        await scheduler.wake_at(delivery, 1.0 if n < WOKEN else 1000.0)
    return scheduler


async def test_waking_the_due_costs_the_same_among_two_hundred_times_the_sleepers() -> None:
    counts: list[int] = []
    for size in (100, 20_000):
        scheduler = await _sleeping(size)
        woken: list[int] = []

        async def work(scheduler: MemoryScheduler = scheduler, woken: list[int] = woken) -> None:
            woken.append(await scheduler.wake_due(2.0))

        counts.append(await _lines(work))
        assert woken == [WOKEN]
        taken = [await scheduler.next_ready(0.0) for _ in range(WOKEN)]
        assert {d.workflow for d in taken if d is not None} == {f"w{n}" for n in range(WOKEN)}
        assert await scheduler.next_ready(0.0) is None
    assert counts[1] <= COUNT_RATIO * counts[0], counts


async def test_the_heaps_stay_bounded_while_one_workflow_is_made_ready_over_and_over() -> None:
    scheduler = await _ready(10)
    # Queued already at the same priority, it is left in place; at another priority it
    # moves, leaving its old heap rows stale: alternate, so every call moves it.
    for n in range(10_000):
        await scheduler.make_ready("w3", priority=WorkPriority.LOW if n % 2 else WorkPriority.HIGH)
    rotation = scheduler._rotation
    line = rotation._tenants["default"]
    assert len(line.ready) <= 2 * 10 + 32 + 1
    assert len(line.by_age) <= 2 * 10 + 32 + 1
    order: list[str] = []
    while (delivery := await scheduler.next_ready(0.0)) is not None:
        order.append(delivery.workflow)
    assert sorted(order) == sorted(f"w{n}" for n in range(10))
    assert order[-1] == "w3"  # made ready last at LOW: taken last
