"""`SchedulerPriorityCases`: within a tenant's turn, the highest priority first.

Part of `SchedulerConformance`. Each test names tenants of its own, so a scheduler whose
namespace other tests share still shows only the test's own order.
"""

from __future__ import annotations

import asyncio

import pytest

from durably.errors import InvalidInputError
from durably.stores.work import WorkPriority
from durably.testing.scheduler_tenants import (
    HOLD,
    T1,
    TenantSchedulerFactory,
    _names,
    _owners,
    _take_all,
)

LOW, HIGH, URGENT = int(WorkPriority.LOW), int(WorkPriority.HIGH), int(WorkPriority.URGENT)


class SchedulerPriorityCases:
    """Priorities order a tenant's own line and never its turn."""

    async def test_high_priority_workflows_made_ready_last_are_handed_out_first(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        # Ids in the order made ready: entries made ready within one tick of the store's
        # clock tie on age and go by id.
        low = [f"low{n:02d}-{name}" for n, name in enumerate(_names("", 50))]
        high = [f"high{n:02d}-{name}" for n, name in enumerate(_names("", 5))]
        for workflow in low:
            await scheduler.make_ready(workflow, tenant="pa", priority=LOW)
        for workflow in high:
            await scheduler.make_ready(workflow, tenant="pa", priority=HIGH)
        order = [d.workflow for d in await _take_all(scheduler, 55)]
        assert order[:5] == high
        assert order[5:] == low  # then the oldest first, as without priorities

    async def test_a_queued_workflow_made_ready_at_another_priority_takes_that_place(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        first, second = _names("first", 1)[0], _names("second", 1)[0]
        await scheduler.make_ready(first, tenant="pq", priority=LOW)
        await asyncio.sleep(0.02)
        await scheduler.make_ready(second, tenant="pq", priority=LOW)
        # Queued already, at another priority: it moves to that priority's place.
        await scheduler.make_ready(second, tenant="pq", priority=HIGH)
        assert [d.workflow for d in await _take_all(scheduler, 2)] == [second, first]

    async def test_a_priority_never_lets_a_tenant_jump_the_rotation(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        tenants = {"pl": _names("loud", 4), "pq": _names("quiet", 2)}
        for workflow in tenants["pl"]:
            await scheduler.make_ready(workflow, tenant="pl", priority=URGENT)
        for workflow in tenants["pq"]:
            await scheduler.make_ready(workflow, tenant="pq", priority=LOW)
        owners = _owners(await _take_all(scheduler, 6), tenants)
        assert owners[:4] in (["pl", "pq"] * 2, ["pq", "pl"] * 2), owners

    async def test_a_priority_survives_a_sleep_a_reclaim_a_lapse_and_a_plain_wakeup(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(0.3)
        await scheduler.prepare()
        low, high = _names("b", 3), _names("z", 1)
        # Made ready last, and its id sorts last: by age or id alone it would come last.
        for workflow in [*low, *high]:
            await scheduler.make_ready(workflow, tenant="ps", priority=LOW)
        await scheduler.make_ready(high[0], priority=HIGH)  # raised, tenant kept

        async def first() -> str:
            taken = await _take_all(scheduler, 4)
            return taken[0].workflow

        taken = await _take_all(scheduler, 4)
        assert taken[0].workflow == high[0]
        for delivery in taken:
            await scheduler.wake_at(delivery, T1)
        assert await scheduler.wake_due(T1) == 4
        assert await first() == high[0]
        await scheduler.reclaim(0)
        assert await first() == high[0]
        await asyncio.sleep(0.45)  # every lease lapses
        assert await first() == high[0]
        await scheduler.reclaim(0)
        for workflow in [*high, *low]:  # made ready naming no priority: each keeps its own
            await scheduler.make_ready(workflow)
        assert await first() == high[0]

    async def test_a_ready_entry_moved_to_another_priority_keeps_its_age_in_the_new_place(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        w = _names("w", 5)
        for workflow in w:
            await scheduler.make_ready(workflow, tenant="pv")
        # Raised last-first: each keeps the age it had, so among the raised, oldest first.
        assert await scheduler.reprioritize(w[4], URGENT)
        assert await scheduler.reprioritize(w[1], URGENT)
        assert await scheduler.reprioritize(w[0], LOW)  # lowered: behind every NORMAL one
        taken = [d.workflow for d in await _take_all(scheduler, 5)]
        assert taken == [w[1], w[4], w[2], w[3], w[0]]
        assert await scheduler.next_ready(0) is None

    async def test_a_sleeping_or_handed_out_entry_keeps_a_new_priority_for_its_next_turn(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        w = _names("s", 4)
        for workflow in w:
            await scheduler.make_ready(workflow, tenant="pw")
        taken = await _take_all(scheduler, 4)
        for delivery in taken[:2]:
            await scheduler.wake_at(delivery, T1)  # w0 and w1 sleep
        # Changed while they sleep and while w2 and w3 are handed out: none is woken by it.
        assert await scheduler.reprioritize(w[1], HIGH)
        assert await scheduler.reprioritize(w[3], URGENT)
        assert await scheduler.next_ready(0) is None
        assert await scheduler.wake_due(T1) == 2
        assert [d.workflow for d in await _take_all(scheduler, 2)] == [w[1], w[0]]
        await scheduler.reclaim(0)  # every hand-out visible again, w3 at its new priority
        assert (await _take_all(scheduler, 1))[0].workflow == w[3]
        # A wakeup that names no priority keeps the one it was moved to.
        await scheduler.reclaim(0)
        for workflow in w:
            await scheduler.make_ready(workflow)
        assert [d.workflow for d in await _take_all(scheduler, 4)] == [w[3], w[1], w[0], w[2]]

    async def test_moving_an_unknown_or_to_an_unusable_priority_changes_nothing(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        absent, present = _names("x", 2)
        assert not await scheduler.reprioritize(absent, HIGH)
        assert await scheduler.next_ready(0) is None  # no entry made for it
        await scheduler.make_ready(present, tenant="px", priority=LOW)
        for bad in (None, 0, 25, "high", 20.0, True):
            with pytest.raises(InvalidInputError, match="priority"):
                await scheduler.reprioritize(present, bad)  # type: ignore[arg-type]
        assert (await _take_all(scheduler, 1))[0].workflow == present

    async def test_an_unusable_priority_is_refused(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        workflow = _names("w", 1)[0]
        for bad in (0, 25, 99, -1, "high", 20.0, True):
            with pytest.raises(InvalidInputError, match="priority"):
                await scheduler.make_ready(workflow, priority=bad)  # type: ignore[arg-type]
        assert await scheduler.next_ready(0) is None


__all__ = ["SchedulerPriorityCases"]
