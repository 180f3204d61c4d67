"""`SchedulerConformance`: the promises every `Scheduler` keeps.

Subclass it and provide ``scheduler_factory``: ``Callable[[float], Awaitable[Scheduler]]``
(the argument is the lease in seconds), each call a scheduler over an empty, isolated
namespace (the subclass cleans up).

Hand-out leases run on the store's own clock, so those tests wait for real (a few tenths of
a second); sleeping entries are due on the caller's clock, so those tests pass any number
they like to `wake_at` and `wake_due`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

import pytest

from durably.errors import InvalidInputError
from durably.stores.workflows import Delivery, Scheduler
from durably.testing.refused import UNUSABLE_IDS
from durably.testing.scheduler_priorities import SchedulerPriorityCases
from durably.testing.scheduler_tenants import SchedulerTenantCases

SchedulerFactory = Callable[[float], Awaitable[Scheduler]]

LONG = 30.0
T0 = 1_000_000.0  # an instant on the caller's clock; the scheduler never reads that clock

STRANGE_IDS = ("{braces}", 'quo"tes', "semi;colon", "co:lon", "100%", "with space", "🚀")


def wf(label: str = "wf") -> str:
    """A workflow id no other test uses."""
    return f"{label}-{uuid.uuid4().hex[:12]}"


async def ready(scheduler: Scheduler, *workflows: str) -> Scheduler:
    await scheduler.prepare()
    for workflow in workflows:
        await scheduler.make_ready(workflow)
    return scheduler


async def take(scheduler: Scheduler, workflow: str) -> Delivery:
    delivery = await scheduler.next_ready(0)
    assert delivery is not None, f"{workflow} should have been delivered"
    assert delivery.workflow == workflow
    return delivery


class SchedulerCases:
    """Delivery, sleeping, extension, reclaiming and cancelling."""

    async def test_a_ready_workflow_is_delivered(self, scheduler_factory: SchedulerFactory) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        delivery = await take(scheduler, workflow)
        assert delivery.receipt
        assert scheduler.lease == LONG

    async def test_prepare_is_idempotent(self, scheduler_factory: SchedulerFactory) -> None:
        scheduler = await scheduler_factory(LONG)
        await scheduler.prepare()
        await scheduler.prepare()
        assert await scheduler.next_ready(0) is None

    async def test_an_empty_scheduler_returns_none_after_about_within(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        scheduler = await ready(await scheduler_factory(LONG))
        started = time.monotonic()
        assert await scheduler.next_ready(0.3) is None
        waited = time.monotonic() - started
        assert 0.25 <= waited < 3.0

    async def test_a_waiting_taker_wakes_promptly_when_a_workflow_becomes_ready(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        scheduler = await ready(await scheduler_factory(LONG))
        workflow = wf()
        started = time.monotonic()
        waiting = asyncio.create_task(scheduler.next_ready(10.0))
        await asyncio.sleep(0.1)
        await scheduler.make_ready(workflow)
        delivery = await asyncio.wait_for(waiting, 5.0)
        assert delivery is not None
        assert delivery.workflow == workflow
        assert time.monotonic() - started < 3.0

    async def test_the_workflow_ready_longest_is_delivered_first(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        scheduler = await ready(await scheduler_factory(LONG))
        first, second = wf("a-first"), wf("b-second")
        await scheduler.make_ready(first)
        await asyncio.sleep(0.02)
        await scheduler.make_ready(second)
        await take(scheduler, first)
        await take(scheduler, second)
        assert await scheduler.next_ready(0) is None

    async def test_a_queued_workflow_made_ready_again_keeps_its_place_in_line(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        # A workflow sent a message while it waits in line is not sent to the back of it
        # (nor is its entry rewritten): it still goes before one queued after it.
        scheduler = await ready(await scheduler_factory(LONG))
        first, second = wf("b-first"), wf("a-second")
        await scheduler.make_ready(first)
        await asyncio.sleep(0.02)
        await scheduler.make_ready(second)
        await asyncio.sleep(0.02)
        await scheduler.make_ready(first)
        await take(scheduler, first)
        await take(scheduler, second)
        assert await scheduler.next_ready(0) is None

    async def test_a_taken_workflow_is_invisible_for_its_lease_then_comes_back(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(0.3), workflow)
        first = await take(scheduler, workflow)
        assert await scheduler.next_ready(0) is None
        await asyncio.sleep(0.45)
        second = await take(scheduler, workflow)
        assert second.receipt != first.receipt
        # The lapsed delivery no longer answers the workflow.
        await scheduler.done(first)
        assert not await scheduler.extend(first, LONG)
        assert await scheduler.extend(second, LONG)

    async def test_a_waiting_taker_gets_a_delivery_whose_lease_lapses(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(0.3), workflow)
        await take(scheduler, workflow)
        again = await scheduler.next_ready(3.0)
        assert again is not None
        assert again.workflow == workflow

    async def test_done_removes_the_workflow(self, scheduler_factory: SchedulerFactory) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(0.2), workflow)
        await scheduler.done(await take(scheduler, workflow))
        await asyncio.sleep(0.3)
        assert await scheduler.next_ready(0) is None
        assert await scheduler.reclaim(0) == []

    async def test_a_wakeup_arriving_mid_pass_survives_done(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        delivery = await take(scheduler, workflow)
        await scheduler.make_ready(workflow)
        await scheduler.done(delivery)
        again = await take(scheduler, workflow)
        assert again.receipt != delivery.receipt

    async def test_one_entry_per_workflow_however_often_it_is_made_ready(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow, workflow)
        await asyncio.gather(*(scheduler.make_ready(workflow) for _ in range(8)))
        await take(scheduler, workflow)
        assert await scheduler.next_ready(0) is None

    async def test_concurrent_takers_share_out_distinct_workflows(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflows = [wf(f"w{n}") for n in range(6)]
        scheduler = await ready(await scheduler_factory(LONG), *workflows)
        deliveries = await asyncio.gather(*(scheduler.next_ready(0) for _ in range(10)))
        taken = [d.workflow for d in deliveries if d is not None]
        assert sorted(taken) == sorted(workflows)

    # --- sleeping ----------------------------------------------------------------------------

    async def test_wake_at_outlives_the_acknowledgement_and_wakes_at_its_time(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        delivery = await take(scheduler, workflow)
        await scheduler.wake_at(delivery, T0 + 100)
        await scheduler.done(delivery)
        assert await scheduler.next_ready(0) is None
        assert await scheduler.wake_due(T0 + 99) == 0
        assert await scheduler.next_ready(0) is None
        assert await scheduler.wake_due(T0 + 100) == 1
        await take(scheduler, workflow)
        assert await scheduler.wake_due(T0 + 1000) == 0

    async def test_wake_at_never_pushes_out_a_wakeup_that_arrived_meanwhile(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        delivery = await take(scheduler, workflow)
        await scheduler.make_ready(workflow)
        await scheduler.wake_at(delivery, T0 + 10_000)
        await take(scheduler, workflow)

    async def test_a_stale_wake_at_can_only_bring_a_sleeping_wakeup_forward(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        stale = await take(scheduler, workflow)
        assert await scheduler.reclaim(0) == [workflow]
        current = await take(scheduler, workflow)
        await scheduler.wake_at(current, T0 + 500)
        await scheduler.wake_at(stale, T0 + 900)
        assert await scheduler.wake_due(T0 + 499) == 0
        await scheduler.wake_at(stale, T0 + 200)
        assert await scheduler.next_ready(0) is None
        assert await scheduler.wake_due(T0 + 200) == 1
        await take(scheduler, workflow)

    async def test_wake_at_for_an_absent_workflow_does_nothing(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        delivery = await take(scheduler, workflow)
        await scheduler.done(delivery)
        await scheduler.wake_at(delivery, T0)
        assert await scheduler.wake_due(T0 + 1) == 0
        assert await scheduler.next_ready(0) is None

    async def test_make_ready_wakes_a_sleeping_workflow_early(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        await scheduler.wake_at(await take(scheduler, workflow), T0 + 100)
        await scheduler.make_ready(workflow)
        await take(scheduler, workflow)
        assert await scheduler.wake_due(T0 + 100) == 0

    async def test_wake_due_wakes_only_what_is_due_and_counts_it(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflows = [wf(f"s{n}") for n in range(3)]
        scheduler = await ready(await scheduler_factory(LONG), *workflows)
        for _ in range(3):
            delivery = await scheduler.next_ready(0)
            assert delivery is not None
            await scheduler.wake_at(delivery, T0 + 10 * workflows.index(delivery.workflow))
        assert await scheduler.wake_due(T0 + 15) == 2
        woken = {
            d.workflow
            for d in [await scheduler.next_ready(0), await scheduler.next_ready(0)]
            if d is not None
        }
        assert woken == set(workflows[:2])
        assert await scheduler.next_ready(0) is None
        assert await scheduler.wake_due(T0 + 20) == 1

    # --- extend, reclaim, cancel -------------------------------------------------------------

    async def test_extend_keeps_a_delivery_invisible(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(0.2), workflow)
        delivery = await take(scheduler, workflow)
        assert await scheduler.extend(delivery, LONG)
        await asyncio.sleep(0.35)
        assert await scheduler.next_ready(0) is None

    async def test_extend_is_false_for_a_delivery_no_longer_held(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        answered = await take(scheduler, workflow)
        await scheduler.done(answered)
        assert not await scheduler.extend(answered, LONG)
        await scheduler.make_ready(workflow)
        superseded = await take(scheduler, workflow)
        await scheduler.make_ready(workflow)
        assert not await scheduler.extend(superseded, LONG)
        sleeping = await take(scheduler, workflow)
        await scheduler.wake_at(sleeping, T0 + 100)
        assert not await scheduler.extend(sleeping, LONG)

    async def test_reclaim_zero_makes_taken_workflows_visible_at_once(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        a, b = wf("a"), wf("b")
        scheduler = await ready(await scheduler_factory(LONG), a, b)
        first = await scheduler.next_ready(0)
        second = await scheduler.next_ready(0)
        assert first is not None
        assert second is not None
        assert await scheduler.reclaim(LONG) == []
        assert sorted(await scheduler.reclaim(0)) == sorted([a, b])
        again = [await scheduler.next_ready(0), await scheduler.next_ready(0)]
        assert {d.workflow for d in again if d is not None} == {a, b}
        # The earlier deliveries no longer answer their workflows.
        await scheduler.done(first)
        await scheduler.done(second)
        assert sorted(await scheduler.reclaim(0)) == sorted([a, b])

    async def test_reclaim_respects_the_idle_threshold(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        old, young = wf("old"), wf("young")
        scheduler = await ready(await scheduler_factory(LONG), old)
        await take(scheduler, old)
        await asyncio.sleep(0.3)
        await scheduler.make_ready(young)
        await take(scheduler, young)
        assert await scheduler.reclaim(0.2) == [old]
        await take(scheduler, old)

    async def test_cancel_removes_queued_sleeping_and_in_flight_entries(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        queued, sleeping, flying = wf("queued"), wf("sleeping"), wf("flying")
        scheduler = await ready(await scheduler_factory(LONG), sleeping)
        await scheduler.wake_at(await take(scheduler, sleeping), T0 + 10)
        await scheduler.make_ready(flying)
        in_flight = await take(scheduler, flying)
        await scheduler.make_ready(queued)
        for workflow in (queued, sleeping, flying):
            await scheduler.cancel(workflow)
        await scheduler.cancel(wf("never-seen"))
        assert await scheduler.next_ready(0) is None
        # Answering the cancelled delivery brings nothing back.
        await scheduler.wake_at(in_flight, T0)
        await scheduler.done(in_flight)
        assert not await scheduler.extend(in_flight, LONG)
        assert await scheduler.wake_due(T0 + 1000) == 0
        assert await scheduler.reclaim(0) == []
        assert await scheduler.next_ready(0) is None

    # --- isolation, identifiers, arguments ---------------------------------------------------

    async def test_schedulers_from_separate_namespaces_are_isolated(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        workflow = wf()
        one = await ready(await scheduler_factory(LONG), workflow)
        other = await ready(await scheduler_factory(LONG))
        assert await other.next_ready(0) is None
        await other.cancel(workflow)
        assert await other.wake_due(T0 + 1000) == 0
        await take(one, workflow)

    async def test_strange_ids_address_exactly_themselves(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        tag = uuid.uuid4().hex[:8]
        workflows = [f"{strange}{tag}" for strange in STRANGE_IDS]
        scheduler = await ready(await scheduler_factory(LONG), *workflows)
        await scheduler.cancel(workflows[0])
        taken: list[str] = []
        while (delivery := await scheduler.next_ready(0)) is not None:
            taken.append(delivery.workflow)
            await scheduler.done(delivery)
        assert sorted(taken) == sorted(workflows[1:])

    async def test_unusable_ids_are_refused(self, scheduler_factory: SchedulerFactory) -> None:
        scheduler = await ready(await scheduler_factory(LONG))
        for bad in UNUSABLE_IDS:
            with pytest.raises(InvalidInputError):
                await scheduler.make_ready(bad)
            with pytest.raises(InvalidInputError):
                await scheduler.cancel(bad)
        assert await scheduler.next_ready(0) is None

    @pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
    async def test_non_positive_durations_are_refused(
        self, scheduler_factory: SchedulerFactory, bad: float
    ) -> None:
        with pytest.raises(ValueError):
            await scheduler_factory(bad)
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        delivery = await take(scheduler, workflow)
        with pytest.raises(ValueError):
            await scheduler.extend(delivery, bad)
        with pytest.raises(ValueError):
            await scheduler.next_ready(-1.0 if bad == 0 else bad)
        with pytest.raises(ValueError):
            await scheduler.reclaim(-1.0 if bad == 0 else bad)
        assert await scheduler.extend(delivery, LONG)


# Suffixes where one id is a prefix, a glob or a pattern of another.
NEAR = ("", ":", "*", "?", "[ab]", "%", "_", "{x}", " ", ":y", "}", "{")


class SchedulerIsolationCases:
    """Every workflow id addresses exactly itself; bad input is refused by name."""

    async def test_near_ids_sleep_wake_and_cancel_as_exactly_themselves(
        self, scheduler_factory: SchedulerFactory
    ) -> None:
        base = f"w{uuid.uuid4().hex[:8]}"
        workflows = [base + suffix for suffix in NEAR]
        scheduler = await ready(await scheduler_factory(LONG), *workflows)
        deliveries: dict[str, Delivery] = {}
        while (delivery := await scheduler.next_ready(0)) is not None:
            deliveries[delivery.workflow] = delivery
        assert sorted(deliveries) == sorted(workflows)
        for n, workflow in enumerate(workflows):
            assert await scheduler.extend(deliveries[workflow], LONG)
            await scheduler.wake_at(deliveries[workflow], T0 + n)
        await scheduler.cancel(base + "*")
        assert await scheduler.wake_due(T0 + 2) == 2  # base and base + ":" ("*" is gone)
        woken = {d.workflow for d in [await scheduler.next_ready(0) for _ in range(3)] if d}
        assert woken == {base, base + ":"}
        for delivery in [deliveries[w] for w in (base, base + ":")]:
            assert not await scheduler.extend(delivery, LONG)
        assert sorted(await scheduler.reclaim(0)) == sorted([base, base + ":"])
        assert await scheduler.wake_due(T0 + len(NEAR)) == len(NEAR) - 3
        taken = set()
        while (delivery := await scheduler.next_ready(0)) is not None:
            taken.add(delivery.workflow)
            await scheduler.done(delivery)
        assert taken == set(workflows) - {base + "*"}

    @pytest.mark.parametrize("bad", UNUSABLE_IDS)
    async def test_every_entry_point_refuses_an_unusable_id(
        self, scheduler_factory: SchedulerFactory, bad: str
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        held = await take(scheduler, workflow)
        stranger = Delivery(bad, held.receipt)
        with pytest.raises(InvalidInputError):
            await scheduler.make_ready(bad)
        with pytest.raises(InvalidInputError):
            await scheduler.cancel(bad)
        with pytest.raises(InvalidInputError):
            await scheduler.wake_at(stranger, T0)
        with pytest.raises(InvalidInputError):
            await scheduler.extend(stranger, LONG)
        with pytest.raises(InvalidInputError):
            await scheduler.done(stranger)
        assert await scheduler.extend(held, LONG)
        assert await scheduler.wake_due(T0 + 1000) == 0
        assert await scheduler.next_ready(0) is None

    @pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
    async def test_every_duration_that_is_not_positive_is_refused_by_name(
        self, scheduler_factory: SchedulerFactory, bad: float
    ) -> None:
        with pytest.raises(ValueError, match="lease"):
            await scheduler_factory(bad)
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        delivery = await take(scheduler, workflow)
        with pytest.raises(ValueError, match="within"):
            await scheduler.extend(delivery, bad)
        negative = -1.0 if bad == 0 else bad
        with pytest.raises(ValueError, match="within"):
            await scheduler.next_ready(negative)
        with pytest.raises(ValueError, match="idle"):
            await scheduler.reclaim(negative)
        assert await scheduler.extend(delivery, LONG)

    @pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
    async def test_an_instant_that_is_not_finite_is_refused(
        self, scheduler_factory: SchedulerFactory, bad: float
    ) -> None:
        workflow = wf()
        scheduler = await ready(await scheduler_factory(LONG), workflow)
        delivery = await take(scheduler, workflow)
        with pytest.raises(ValueError):
            await scheduler.wake_at(delivery, bad)
        with pytest.raises(ValueError):
            await scheduler.wake_due(bad)
        assert await scheduler.extend(delivery, LONG)


class SchedulerConformance(
    SchedulerCases, SchedulerIsolationCases, SchedulerTenantCases, SchedulerPriorityCases
):
    """Every test here must pass for every `Scheduler` durably ships."""
