"""`enqueue_many`, and `claim_many`, `complete_many` and `complete_and_claim` for the
queues that offer them: each item queued as `enqueue` queues it, claimed as `claim` claims
it and settled as `complete` settles it, fenced on its own lease, with a result per item in
the order asked."""

from __future__ import annotations

from typing import Any

import pytest

from durably.clock import ManualClock
from durably.errors import InvalidInputError, LeaseLostError, WorkItemNotFoundError
from durably.stores.work import WorkItem, WorkPriority, WorkQueue, WorkState
from durably.testing.queue.fixtures import QueueFixtures, new_item, unique
from durably.testing.queue.order import drain


def _complete_many(work_queue: WorkQueue) -> Any:
    complete_many = getattr(work_queue, "complete_many", None)
    if complete_many is None:
        pytest.skip("this queue has no complete_many")
    return complete_many


def _complete_and_claim(work_queue: WorkQueue) -> Any:
    complete_and_claim = getattr(work_queue, "complete_and_claim", None)
    if complete_and_claim is None:
        pytest.skip("this queue has no complete_and_claim")
    return complete_and_claim


def _claim_many(work_queue: WorkQueue) -> Any:
    claim_many = getattr(work_queue, "claim_many", None)
    if claim_many is None:
        pytest.skip("this queue has no claim_many")
    return claim_many


def _mixed_batch(tenants: dict[str, str], queue: str, now: float) -> list[WorkItem]:
    """Items of every shape a batch may hold, tenants interleaved: priorities, delays
    past and future, an id and a dedupe key each given twice, carried attempts, a gate."""

    def item(role: str, item_id: str, **fields: object) -> WorkItem:
        return new_item(tenants[role], item_id, queue=queue, **fields)

    return [
        item("a", "a0"),
        item("b", "b0", priority=WorkPriority.URGENT),
        item("a", "a1", priority=WorkPriority.LOW),
        item("a", "a0", payload={"second": "yes"}),
        item("c", "c0", available_at=now + 5),
        item("b", "b1", dedupe_key="k"),
        item("b", "b2", dedupe_key="k"),
        item("c", "c1", available_at=now - 3),
        item("a", "held"),
        item("b", "b3", attempts=1, failures=("earlier",)),
        item("a", "a2", concurrency_key="g", concurrency_limit=2),
        item("c", "c2"),
    ]


class QueueBatchCases(QueueFixtures):
    """Queueing, claiming and settling several items in one call."""

    async def test_a_batch_is_answered_and_claimed_as_the_same_enqueues_one_by_one(
        self, work_queue: WorkQueue, clock: ManualClock
    ) -> None:
        # The same items twice, under other tenants and queues: one by one, then batched.
        seen: list[list[tuple[str, str, str, dict[str, str]]]] = []
        orders: list[list[tuple[str, str]]] = []
        counts: list[tuple[int, int]] = []
        for batched in (False, True):
            tenants = {role: unique(role) for role in "abc"}
            roles = {tenant: role for role, tenant in tenants.items()}
            queue = unique("queue")
            await work_queue.enqueue(new_item(tenants["a"], "held", queue=queue))
            plan = _mixed_batch(tenants, queue, clock.now())
            if batched:
                answers = await work_queue.enqueue_many(plan, dedupe_ttl=60)
            else:
                answers = [await work_queue.enqueue(item, dedupe_ttl=60) for item in plan]
            seen.append([(roles[a.tenant], a.id, a.state.value, a.payload) for a in answers])
            stats = await work_queue.stats(queue=queue)
            counts.append((stats.depth, stats.duplicates_suppressed))
            taken = await drain(work_queue, queue, 9)
            assert await work_queue.claim(worker="w1", queue=queue) is None
            clock.advance(5)
            taken += await drain(work_queue, queue, 1)
            orders.append([(roles[tenant], item_id) for tenant, item_id in taken])
        assert seen[1] == seen[0]
        assert [item_id for _, item_id, _, _ in seen[1]][3:7] == ["a0", "c0", "b1", "b1"]
        assert seen[1][3][3] == {}  # the first "a0", not the second's payload
        assert counts[1] == counts[0] == (10, 3)
        assert orders[1] == orders[0]

    async def test_a_batch_mixing_tenants_takes_turns_as_single_enqueues_do(
        self, work_queue: WorkQueue, queue_name: str, clock: ManualClock
    ) -> None:
        loud, quiet, late = unique("loud"), unique("quiet"), unique("late")
        await work_queue.enqueue(new_item(late, "l0", queue=queue_name))
        assert await drain(work_queue, queue_name, 1) == [(late, "l0")]  # served: a turn
        clock.advance(1)
        now = clock.now()
        # The loud tenant's oldest item comes first in its run, the quiet one's between.
        batch = [
            new_item(loud, f"x{n}", queue=queue_name, available_at=at)
            for n, at in enumerate((now - 2, now, now))
        ]
        batch.append(new_item(quiet, "q0", queue=queue_name, available_at=now - 1))
        batch.append(new_item(loud, "x3", queue=queue_name))
        batch.append(new_item(late, "l1", queue=queue_name))
        await work_queue.enqueue_many(batch)
        taken = await drain(work_queue, queue_name, 6)
        # Never-served tenants first, by their oldest due item; the served one after them.
        assert [tenant for tenant, _ in taken] == [loud, quiet, late, loud, loud, loud]
        assert [item_id for tenant, item_id in taken if tenant == loud] == [
            "x0",
            "x1",
            "x2",
            "x3",
        ]

    async def test_a_batched_claim_takes_what_as_many_single_claims_would_each_leased(
        self, work_queue: WorkQueue, queue_name: str, clock: ManualClock
    ) -> None:
        claim_many = _claim_many(work_queue)
        for tenant in ("a", "b"):
            for n in range(3):
                await work_queue.enqueue(new_item(tenant, f"{tenant}{n}", queue=queue_name))
                clock.advance(1)
        batch = await claim_many(worker="w1", queue=queue_name, limit=4)
        # Tenants in turn, each its oldest first: what four single claims take (in any
        # order within the batch).
        assert sorted(item.id for item in batch) == ["a0", "a1", "b0", "b1"]
        for item in batch:
            assert (item.state, item.worker) == (WorkState.CLAIMED, "w1")
            assert item.lease_expires_at == clock.now() + 10
        rest = await claim_many(worker="w2", queue=queue_name, limit=10)
        assert sorted(item.id for item in rest) == ["a2", "b2"]
        assert await claim_many(worker="w2", queue=queue_name, limit=10) == []
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed) == (0, 6)
        for bad in ({"limit": 0}, {"worker": ""}, {"queue": ""}):
            with pytest.raises(InvalidInputError):
                await claim_many(**{"worker": "w1", "queue": queue_name, "limit": 2, **bad})

    async def test_completing_many_settles_each_held_item_and_names_each_it_could_not(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        complete_many = _complete_many(work_queue)
        for item_id in ("a", "b", "c", "d"):
            await work_queue.enqueue(new_item(tenant, item_id, queue=queue_name))
        for worker in ("w1", "w1", "w1", "w2"):
            assert await work_queue.claim(worker=worker, queue=queue_name) is not None
        await work_queue.complete("b", tenant=tenant, worker="w1")
        results = await complete_many(
            [("a", tenant), ("b", tenant), ("d", tenant), ("nope", tenant), ("c", tenant)],
            worker="w1",
        )
        assert [type(result).__name__ for result in results] == [
            "WorkItem",
            "WorkItemNotFoundError",
            "LeaseLostError",
            "WorkItemNotFoundError",
            "WorkItem",
        ]
        assert [(results[0].id, results[0].state), (results[4].id, results[4].state)] == [
            ("a", WorkState.COMPLETED),
            ("c", WorkState.COMPLETED),
        ]
        assert (results[2].reason, results[2].holder) == ("taken", "w2")
        # The item another worker holds is untouched: still its holder's to complete.
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed) == (0, 1)
        done = await work_queue.complete("d", tenant=tenant, worker="w2")
        assert done.state == WorkState.COMPLETED
        assert await complete_many([], worker="w1") == []

    async def test_completing_many_is_fenced_on_each_items_own_lease(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        complete_many = _complete_many(work_queue)
        for item_id in ("early", "late"):
            await work_queue.enqueue(new_item(tenant, item_id, queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(6)
        await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(6)  # the first lease (10 s) has lapsed, the second has not
        expired, done = await complete_many([("early", tenant), ("late", tenant)], worker="w1")
        assert isinstance(expired, LeaseLostError)
        assert expired.reason == "expired"
        assert not isinstance(done, Exception)
        assert (done.id, done.state) == ("late", WorkState.COMPLETED)
        (reaped,) = await work_queue.reap()
        assert (reaped.id, reaped.state, reaped.attempts) == ("early", WorkState.QUEUED, 1)

    async def test_completing_many_with_a_bad_id_refuses_all_before_any_is_settled(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        complete_many = _complete_many(work_queue)
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        for items, worker in (
            ([("job", tenant), ("", tenant)], "w1"),
            ([("job", tenant), ("x", "")], "w1"),
            ([("job", tenant)], ""),
        ):
            with pytest.raises(InvalidInputError):
                await complete_many(items, worker=worker)
        stats = await work_queue.stats(queue=queue_name)
        assert stats.claimed == 1
        with pytest.raises(WorkItemNotFoundError):
            await work_queue.complete("nope", tenant=tenant, worker="w1")
        done = await work_queue.complete("job", tenant=tenant, worker="w1")
        assert done.state == WorkState.COMPLETED

    async def test_completing_and_claiming_settles_each_then_takes_what_claims_would(
        self, work_queue: WorkQueue, queue_name: str, clock: ManualClock
    ) -> None:
        complete_and_claim = _complete_and_claim(work_queue)
        for tenant in ("a", "b"):
            for n in range(3):
                await work_queue.enqueue(new_item(tenant, f"{tenant}{n}", queue=queue_name))
                clock.advance(1)
        first = await work_queue.claim(worker="w1", queue=queue_name)
        theirs = await work_queue.claim(worker="w2", queue=queue_name)
        assert first is not None
        assert theirs is not None
        done, taken = await complete_and_claim(
            [(first.id, first.tenant), (theirs.id, theirs.tenant), ("nope", "a")],
            worker="w1",
            queue=queue_name,
            limit=3,
        )
        assert [type(result).__name__ for result in done] == [
            "WorkItem",
            "LeaseLostError",
            "WorkItemNotFoundError",
        ]
        assert (done[0].id, done[0].state) == (first.id, WorkState.COMPLETED)
        # The claims are the next three that single claims take: tenants in turn.
        assert sorted(item.id for item in taken) == ["a1", "a2", "b1"]
        for item in taken:
            assert (item.state, item.worker) == (WorkState.CLAIMED, "w1")
            assert item.lease_expires_at == clock.now() + 10
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed) == (1, 4)
        # Nothing to complete: a claim alone; nothing left: completions alone.
        _, rest = await complete_and_claim([], worker="w1", queue=queue_name, limit=5)
        assert [item.id for item in rest] == ["b2"]
        done, none = await complete_and_claim(
            [(item.id, item.tenant) for item in [*taken, *rest]],
            worker="w1",
            queue=queue_name,
            limit=5,
        )
        assert [getattr(result, "state", None) for result in done] == [WorkState.COMPLETED] * 4
        assert none == []

    async def test_completing_and_claiming_with_bad_input_changes_nothing(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        complete_and_claim = _complete_and_claim(work_queue)
        for item_id in ("held", "queued"):
            await work_queue.enqueue(new_item(tenant, item_id, queue=queue_name))
        held = await work_queue.claim(worker="w1", queue=queue_name)
        assert held is not None
        for bad in (
            {"queue": ""},
            {"limit": 0},
            {"worker": ""},
            {"items": [(held.id, tenant), ("", tenant)]},
            {"lease_seconds": -1.0},
        ):
            arguments: dict[str, Any] = {
                "items": [(held.id, tenant)],
                "worker": "w1",
                "queue": queue_name,
                "limit": 1,
                **bad,
            }
            with pytest.raises(InvalidInputError):
                await complete_and_claim(arguments.pop("items"), **arguments)
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed) == (1, 1)
        done = await work_queue.complete(held.id, tenant=tenant, worker="w1")
        assert done.state == WorkState.COMPLETED


__all__ = ["QueueBatchCases"]
