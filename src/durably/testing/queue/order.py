"""Ordering cases of `WorkQueueConformance`: tenants in rotation, then priority, then age."""

from __future__ import annotations

from durably.clock import ManualClock
from durably.stores.work import WorkPriority, WorkQueue
from durably.testing.queue.fixtures import QueueFixtures, new_item, unique


async def drain(work_queue: WorkQueue, queue: str, count: int) -> list[tuple[str, str]]:
    """(tenant, id) of the next ``count`` claims, completing each at once."""
    taken: list[tuple[str, str]] = []
    for _ in range(count):
        item = await work_queue.claim(worker="w1", queue=queue)
        assert item is not None, f"only {len(taken)} of {count} items were handed out"
        await work_queue.complete(item.id, tenant=item.tenant, worker="w1")
        taken.append((item.tenant, item.id))
    return taken


class QueueOrderCases(QueueFixtures):
    """The fairness order of `durably.work`, applied by every backing's claim."""

    async def test_a_quiet_tenant_is_not_stuck_behind_a_loud_one(
        self, work_queue: WorkQueue, queue_name: str
    ) -> None:
        loud, quiet = unique("loud"), unique("quiet")
        for n in range(4):
            await work_queue.enqueue(new_item(loud, f"l{n}", queue=queue_name))
        await work_queue.enqueue(new_item(quiet, "q0", queue=queue_name))
        first_two = await drain(work_queue, queue_name, 2)
        assert (quiet, "q0") in first_two
        rest = await drain(work_queue, queue_name, 3)
        assert {tenant for tenant, _ in rest} == {loud}

    async def test_three_tenants_take_turns(
        self, work_queue: WorkQueue, queue_name: str, clock: ManualClock
    ) -> None:
        a, b, c = unique("a"), unique("b"), unique("c")
        for tenant in (a, b, c):
            for n in range(3):
                await work_queue.enqueue(new_item(tenant, f"i{n}", queue=queue_name))
                clock.advance(1)
        taken = await drain(work_queue, queue_name, 9)
        assert [tenant for tenant, _ in taken] == [a, b, c] * 3
        assert [item_id for tenant, item_id in taken if tenant == b] == ["i0", "i1", "i2"]

    async def test_a_served_tenant_goes_behind_a_tenant_never_served(
        self, work_queue: WorkQueue, queue_name: str, clock: ManualClock
    ) -> None:
        a, b, c = unique("a"), unique("b"), unique("c")
        await work_queue.enqueue(new_item(a, "a0", queue=queue_name))
        await work_queue.enqueue(new_item(a, "a1", queue=queue_name))
        clock.advance(1)
        await work_queue.enqueue(new_item(b, "b0", queue=queue_name))
        assert await drain(work_queue, queue_name, 1) == [(a, "a0")]
        clock.advance(1)
        await work_queue.enqueue(new_item(c, "c0", queue=queue_name))
        assert await drain(work_queue, queue_name, 3) == [(b, "b0"), (c, "c0"), (a, "a1")]

    async def test_turns_are_kept_per_queue(
        self, work_queue: WorkQueue, queue_name: str, clock: ManualClock
    ) -> None:
        a, b = unique("a"), unique("b")
        other = unique("queue")
        await work_queue.enqueue(new_item(a, "a-here", queue=queue_name))
        await work_queue.enqueue(new_item(a, "a-there", queue=other))
        clock.advance(1)
        await work_queue.enqueue(new_item(b, "b-there", queue=other))
        assert await drain(work_queue, queue_name, 1) == [(a, "a-here")]
        assert await drain(work_queue, other, 2) == [(a, "a-there"), (b, "b-there")]

    async def test_within_a_tenant_the_highest_priority_then_the_oldest_goes_first(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        plan = [
            ("low", WorkPriority.LOW),
            ("normal-1", WorkPriority.NORMAL),
            ("urgent", WorkPriority.URGENT),
            ("normal-2", WorkPriority.NORMAL),
            ("high", WorkPriority.HIGH),
        ]
        for item_id, priority in plan:
            await work_queue.enqueue(new_item(tenant, item_id, queue=queue_name, priority=priority))
            clock.advance(1)
        taken = await drain(work_queue, queue_name, 5)
        assert [item_id for _, item_id in taken] == [
            "urgent",
            "high",
            "normal-1",
            "normal-2",
            "low",
        ]

    async def test_items_enqueued_at_the_same_instant_go_out_in_enqueue_order(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        ids = [f"i{n}" for n in (5, 2, 8, 0, 9, 1)]
        for item_id in ids:
            await work_queue.enqueue(new_item(tenant, item_id, queue=queue_name))
        taken = await drain(work_queue, queue_name, len(ids))
        assert [item_id for _, item_id in taken] == ids

    async def test_priority_never_lets_a_tenant_jump_the_rotation(
        self, work_queue: WorkQueue, queue_name: str, clock: ManualClock
    ) -> None:
        loud, quiet = unique("loud"), unique("quiet")
        for n in range(3):
            await work_queue.enqueue(
                new_item(loud, f"u{n}", queue=queue_name, priority=WorkPriority.URGENT)
            )
        clock.advance(1)
        await work_queue.enqueue(
            new_item(quiet, "low", queue=queue_name, priority=WorkPriority.LOW)
        )
        taken = await drain(work_queue, queue_name, 4)
        assert [tenant for tenant, _ in taken] == [loud, quiet, loud, loud]

    async def test_an_item_waiting_out_its_backoff_does_not_hold_up_the_rest(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(
            new_item(tenant, "flaky", queue=queue_name, priority=WorkPriority.URGENT)
        )
        await work_queue.enqueue(new_item(tenant, "steady", queue=queue_name))
        flaky = await work_queue.claim(worker="w1", queue=queue_name)
        assert flaky is not None
        assert flaky.id == "flaky"
        await work_queue.fail("flaky", tenant=tenant, worker="w1", error="retry me")
        assert await drain(work_queue, queue_name, 1) == [(tenant, "steady")]
        assert await work_queue.claim(worker="w1", queue=queue_name) is None
        clock.advance(work_queue.policy.backoff_for(1))
        assert await drain(work_queue, queue_name, 1) == [(tenant, "flaky")]

    async def test_tenants_at_one_turn_go_by_their_oldest_due_item_not_their_first_enqueue(
        self, work_queue: WorkQueue, queue_name: str, clock: ManualClock
    ) -> None:
        # The tie between tenants is (availability, enqueue order) of each tenant's oldest
        # due item: a tenant whose earliest enqueue is a later-due item does not win with it.
        a, b = unique("a"), unique("b")
        now = clock.now()
        await work_queue.enqueue(new_item(a, "a-first", queue=queue_name, available_at=now - 1))
        await work_queue.enqueue(new_item(b, "b-oldest", queue=queue_name, available_at=now - 2))
        await work_queue.enqueue(new_item(a, "a-oldest", queue=queue_name, available_at=now - 2))
        taken = await drain(work_queue, queue_name, 3)
        assert taken == [(b, "b-oldest"), (a, "a-oldest"), (a, "a-first")]


__all__ = ["QueueOrderCases", "drain"]
