"""`SchedulerTenantCases`: tenants served in turn, whatever their wakeups do.

Part of `SchedulerConformance`. Each test names tenants of its own, so a scheduler whose
namespace other tests share still shows only the test's own order.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import pytest

from durably.errors import InvalidInputError
from durably.stores.workflows import Delivery, Scheduler
from durably.testing.refused import UNUSABLE_IDS

TenantSchedulerFactory = Callable[[float], Awaitable[Scheduler]]

HOLD = 30.0  # a lease no test outlives
NOISY_BURST = 2_000
READIED_AT_ONCE = 16
"""Calls in flight at once while a burst is made ready."""
T1 = 2_000_000.0  # an instant on the caller's clock


def _names(label: str, count: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"{label}{n}-{tag}" for n in range(count)]


async def _ready_for(scheduler: Scheduler, tenant: str, workflows: list[str]) -> None:
    for workflow in workflows:
        await scheduler.make_ready(workflow, tenant=tenant)


async def _ready_at_once(scheduler: Scheduler, tenant: str, workflows: list[str]) -> None:
    """`_ready_for` with `READIED_AT_ONCE` calls in flight, where the order within the
    tenant does not matter (a burst made ready by many producers at once)."""
    for first in range(0, len(workflows), READIED_AT_ONCE):
        batch = workflows[first : first + READIED_AT_ONCE]
        await asyncio.gather(*(scheduler.make_ready(w, tenant=tenant) for w in batch))


async def _take_all(scheduler: Scheduler, count: int) -> list[Delivery]:
    taken: list[Delivery] = []
    for _ in range(count):
        delivery = await scheduler.next_ready(0)
        assert delivery is not None, f"only {len(taken)} of {count} were handed out"
        taken.append(delivery)
    return taken


def _every(tenants: dict[str, list[str]]) -> list[str]:
    return [workflow for names in tenants.values() for workflow in names]


def _owners(taken: list[Delivery], tenants: dict[str, list[str]]) -> list[str]:
    """The tenant of each hand-out, in hand-out order."""
    owner = {workflow: tenant for tenant, names in tenants.items() for workflow in names}
    return [owner[delivery.workflow] for delivery in taken]


class SchedulerTenantCases:
    """Round-robin over tenants with a ready workflow, at any burst size."""

    async def test_a_quiet_tenant_is_served_among_the_first_beside_a_noisy_burst(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        noisy = _names("noisy", NOISY_BURST)
        await _ready_at_once(scheduler, "noisy", noisy)
        quiet = _names("quiet", 1)
        await _ready_for(scheduler, "quiet", quiet)
        order = [d.workflow for d in await _take_all(scheduler, 3)]
        assert quiet[0] in order[:2], order
        # Once served, the noisy tenant waits behind a quiet tenant that comes back.
        again = _names("again", 1)
        await _ready_for(scheduler, "quiet", again)
        assert (await _take_all(scheduler, 1))[0].workflow == again[0]

    async def test_tenants_take_turns_one_workflow_each(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        tenants = {tenant: _names(tenant, 3) for tenant in ("ta", "tb", "tc")}
        for tenant, workflows in tenants.items():
            await _ready_for(scheduler, tenant, workflows)
        taken = await _take_all(scheduler, 9)
        assert _owners(taken, tenants) == ["ta", "tb", "tc"] * 3
        # Within a tenant, the workflow ready longest first.
        assert [d.workflow for d in taken[::3]] == tenants["ta"]
        assert await scheduler.next_ready(0) is None

    async def test_a_tenant_keeps_its_turn_while_it_has_nothing_ready(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        # Ids that sort in the order they are made ready: a store clock too coarse to tell
        # them apart breaks the tie by id alike.
        early, busy, late = _names("a-early", 1), _names("b-busy", 5), _names("c-late", 1)
        await _ready_for(scheduler, "back", early)
        await _ready_for(scheduler, "busy", busy)
        assert [d.workflow for d in await _take_all(scheduler, 3)] == [early[0], *busy[:2]]
        await _ready_for(scheduler, "back", late)
        assert (await _take_all(scheduler, 1))[0].workflow == late[0]

    async def test_wakeups_of_every_kind_keep_the_tenant(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        # Ids of one tenant sort before the other's: served by id alone they would not
        # alternate, so alternation shows each wakeup kept its tenant.
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        tenants = {"ka": _names("a", 3), "kb": _names("b", 3)}
        for tenant, workflows in tenants.items():
            await _ready_for(scheduler, tenant, workflows)
        taken = await _take_all(scheduler, 6)
        for delivery in taken:  # asleep, then woken together by wake_due
            await scheduler.wake_at(delivery, T1)
        assert await scheduler.wake_due(T1) == 6
        taken = await _take_all(scheduler, 6)
        assert _owners(taken, tenants) == ["ka", "kb"] * 3
        assert sorted(await scheduler.reclaim(0)) == sorted(_every(tenants))
        taken = await _take_all(scheduler, 6)
        assert _owners(taken, tenants) == ["ka", "kb"] * 3
        for workflow in sorted(_every(tenants)):  # made ready naming no tenant
            await scheduler.make_ready(workflow)
        assert _owners(await _take_all(scheduler, 6), tenants) == ["ka", "kb"] * 3

    async def test_a_lapsed_hand_out_is_served_in_its_tenants_turn(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(0.3)
        await scheduler.prepare()
        tenants = {"la": _names("a", 3), "lb": _names("b", 3)}
        for tenant, workflows in tenants.items():
            await _ready_for(scheduler, tenant, workflows)
        first = await _take_all(scheduler, 6)
        await asyncio.sleep(0.45)
        again = await _take_all(scheduler, 6)
        assert _owners(again, tenants) == ["la", "lb"] * 3
        for stale in first:  # the lapsed deliveries no longer answer their workflows
            await scheduler.done(stale)
            assert not await scheduler.extend(stale, HOLD)
        for current in again:
            assert await scheduler.extend(current, HOLD)

    async def test_a_workflow_made_ready_for_another_tenant_moves_there_once(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        moved, stays = _names("moved", 1)[0], _names("stays", 1)[0]
        await scheduler.make_ready(moved, tenant="from")
        await scheduler.make_ready(stays, tenant="from")
        await scheduler.make_ready(moved, tenant="to")
        taken = sorted(d.workflow for d in await _take_all(scheduler, 2))
        assert taken == sorted([moved, stays])
        assert await scheduler.next_ready(0) is None

    async def test_tenants_whose_workflows_were_cancelled_never_block_the_rest(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        gone = _names("gone", 60)
        for n, workflow in enumerate(gone):
            await scheduler.make_ready(workflow, tenant=f"gone{n}")
        left = _names("left", 1)
        await _ready_for(scheduler, "left", left)
        for workflow in gone:
            await scheduler.cancel(workflow)
        assert (await _take_all(scheduler, 1))[0].workflow == left[0]
        assert await scheduler.next_ready(0) is None

    async def test_concurrent_takers_share_out_every_tenants_workflows(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        tenants = {tenant: _names(tenant, 3) for tenant in ("ca", "cb", "cc")}
        for tenant, workflows in tenants.items():
            await _ready_for(scheduler, tenant, workflows)
        deliveries = await asyncio.gather(*(scheduler.next_ready(0) for _ in range(12)))
        taken = [d.workflow for d in deliveries if d is not None]
        assert sorted(taken) == sorted(_every(tenants))

    async def test_an_unusable_tenant_is_refused(
        self, scheduler_factory: TenantSchedulerFactory
    ) -> None:
        scheduler = await scheduler_factory(HOLD)
        await scheduler.prepare()
        workflow = _names("w", 1)[0]
        for bad in UNUSABLE_IDS:
            with pytest.raises(InvalidInputError, match="tenant"):
                await scheduler.make_ready(workflow, tenant=bad)
        assert await scheduler.next_ready(0) is None


__all__ = ["SchedulerTenantCases"]
