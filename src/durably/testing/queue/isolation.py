"""Isolation cases of `WorkQueueConformance`: near ids, awkward workers and refused input."""

from __future__ import annotations

import math

import pytest

from durably.clock import ManualClock
from durably.errors import InvalidInputError, LeaseLostError, WorkItemNotFoundError
from durably.stores.work import WorkItem, WorkQueue, WorkState
from durably.testing.queue.fixtures import QueueFixtures, new_item, unique
from durably.testing.refused import UNUSABLE_IDS

# Ids where one is a prefix, a glob or a pattern of another: a queue that matched keys by
# pattern or joined segments with a separator would confuse them.
NEAR_IDS = ("x", "x:", "x*", "x?", "x[ab]", "x%", "x_", "{x}", "x ", "x:y")


class QueueIsolationCases(QueueFixtures):
    """Every id addresses exactly itself; bad input is refused before anything is stored."""

    async def test_near_dedupe_keys_queues_and_tenants_never_suppress_each_other(
        self, work_queue: WorkQueue
    ) -> None:
        base = unique("t")
        tenants = [base, f"{base}:", f"{base}*"]
        queues = [f"{base}-q", f"{base}-q:", f"{base}-q*"]
        made: set[tuple[str, str, str]] = set()
        for tenant in tenants:
            for queue in queues:
                for key in NEAR_IDS:
                    item = new_item(tenant, f"{queue}|{key}", queue=queue, dedupe_key=key)
                    stored = await work_queue.enqueue(item)
                    assert (stored.tenant, stored.id, stored.dedupe_key) == (tenant, item.id, key)
                    made.add((tenant, queue, key))
        for queue in queues:
            stats = await work_queue.stats(queue=queue)
            assert (stats.depth, stats.duplicates_suppressed) == (len(tenants) * len(NEAR_IDS), 0)
        again = await work_queue.enqueue(
            new_item(tenants[1], "dup", queue=queues[2], dedupe_key="x*")
        )
        assert again.id == f"{queues[2]}|x*"
        assert (await work_queue.stats(queue=queues[2])).duplicates_suppressed == 1
        seen: set[tuple[str, str, str]] = set()
        for queue in queues:
            while (taken := await work_queue.claim(worker="w", queue=queue)) is not None:
                assert taken.queue == queue
                assert taken.dedupe_key is not None
                seen.add((taken.tenant, taken.queue, taken.dedupe_key))
        assert seen == made

    async def test_awkward_worker_ids_hold_exactly_their_own_claims(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        workers = NEAR_IDS
        for worker in workers:
            await work_queue.enqueue(new_item(tenant, f"job {worker}", queue=queue_name))
        held = {}
        for worker in workers:
            item = await work_queue.claim(worker=worker, queue=queue_name)
            assert item is not None
            assert item.worker == worker
            held[worker] = item.id
        with pytest.raises(LeaseLostError) as lost:
            await work_queue.complete(held["x"], tenant=tenant, worker="x*")
        assert (lost.value.holder, lost.value.reason) == ("x", "taken")
        assert [item.id for item in await work_queue.adopt(worker="x*")] == [held["x*"]]
        assert [item.id for item in await work_queue.adopt(worker="x")] == [held["x"]]
        for worker in workers:
            if worker in ("x", "x*"):
                continue
            done = await work_queue.complete(held[worker], tenant=tenant, worker=worker)
            assert (done.state, done.worker) == (WorkState.COMPLETED, worker)
        assert (await work_queue.stats(queue=queue_name)).depth == 2

    @pytest.mark.parametrize("bad", UNUSABLE_IDS)
    async def test_every_entry_point_refuses_an_unusable_id_and_stores_nothing(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, bad: str
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "held", queue=queue_name))
        assert await work_queue.claim(worker="w1", queue=queue_name) is not None
        for field in ("id", "tenant", "queue", "dedupe_key"):
            values = {**new_item(tenant, queue=queue_name).__dict__, field: bad}
            item = WorkItem.model_construct(**values)
            with pytest.raises(InvalidInputError):
                await work_queue.enqueue(item)
        with pytest.raises(InvalidInputError):
            await work_queue.claim(worker=bad, queue=queue_name)
        with pytest.raises(InvalidInputError):
            await work_queue.claim(worker="w1", queue=bad)
        for item_id, owner, worker in (
            (bad, tenant, "w1"),
            ("held", bad, "w1"),
            ("held", tenant, bad),
        ):
            with pytest.raises(InvalidInputError):
                await work_queue.heartbeat(item_id, tenant=owner, worker=worker)
            with pytest.raises(InvalidInputError):
                await work_queue.complete(item_id, tenant=owner, worker=worker)
            with pytest.raises(InvalidInputError):
                await work_queue.fail(item_id, tenant=owner, worker=worker, error="e")
        with pytest.raises(InvalidInputError):
            await work_queue.adopt(worker=bad)
        with pytest.raises(InvalidInputError):
            await work_queue.dead_letters(tenant=bad)
        with pytest.raises(InvalidInputError):
            await work_queue.dead_letters(tenant=tenant, queue=bad)
        with pytest.raises(InvalidInputError):
            await work_queue.stats(queue=bad)
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed, stats.duplicates_suppressed) == (0, 1, 0)
        held = await work_queue.heartbeat("held", tenant=tenant, worker="w1")
        assert held.state is WorkState.CLAIMED

    @pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf])
    async def test_a_claim_lease_that_is_not_a_positive_duration_is_refused_by_name(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, bad: float
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        with pytest.raises(ValueError, match="lease_seconds"):
            await work_queue.claim(worker="w1", queue=queue_name, lease_seconds=bad)
        assert (await work_queue.stats(queue=queue_name)).depth == 1

    async def test_another_tenants_worker_cannot_touch_an_item_of_the_same_id(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        other = unique("other")
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        mine = await work_queue.claim(worker="w1", queue=queue_name)
        assert mine is not None
        for call in (
            work_queue.heartbeat("job", tenant=other, worker="w1"),
            work_queue.complete("job", tenant=other, worker="w1"),
            work_queue.fail("job", tenant=other, worker="w1", error="x", retryable=False),
        ):
            with pytest.raises(WorkItemNotFoundError):
                await call
        assert await work_queue.dead_letters(tenant=other) == []
        done = await work_queue.complete("job", tenant=tenant, worker="w1")
        assert (done.state, done.attempts) == (WorkState.COMPLETED, 0)

    async def test_dead_letters_of_every_tenant_come_oldest_first_when_no_tenant_is_named(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        other, elsewhere = unique("other"), unique("queue")
        made = [(tenant, queue_name), (other, elsewhere), (other, queue_name), (tenant, elsewhere)]
        for n, (owner, queue) in enumerate(made):
            await work_queue.enqueue(new_item(owner, f"dead {n}", queue=queue))
            clock.advance(1)
        for n, (owner, queue) in enumerate(made):
            held = await work_queue.claim(worker="w", queue=queue)
            assert held is not None
            assert held.id == f"dead {n}"
            await work_queue.fail(held.id, tenant=owner, worker="w", error="x", retryable=False)
        everyone = await work_queue.dead_letters(limit=1000)
        mine = [i.id for i in everyone if i.tenant in (tenant, other)]
        assert mine == ["dead 0", "dead 1", "dead 2", "dead 3"]
        one_queue = await work_queue.dead_letters(queue=queue_name)
        assert [(i.tenant, i.id) for i in one_queue] == [(tenant, "dead 0"), (other, "dead 2")]
        assert [i.id for i in await work_queue.dead_letters(queue=elsewhere, limit=1)] == ["dead 1"]
        assert [i.id for i in await work_queue.dead_letters(tenant=other)] == ["dead 1", "dead 2"]

    async def test_dead_letters_come_page_by_page_each_once_in_order_from_a_cursor(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        other = unique("other")
        made = [(other if n % 3 == 0 else tenant, f"dead {n}") for n in range(7)]
        for owner, item_id in made:
            await work_queue.enqueue(new_item(owner, item_id, queue=queue_name))
            clock.advance(1)
        for _ in made:
            held = await work_queue.claim(worker="w", queue=queue_name)
            assert held is not None
            await work_queue.fail(
                held.id, tenant=held.tenant, worker="w", error="x", retryable=False
            )

        async def pages(**only: str) -> list[list[str]]:
            seen: list[list[str]] = []
            after = None
            while True:
                page = await work_queue.dead_letter_page(limit=3, after=after, **only)
                seen.append([item.id for item in page.items])
                if page.after is None:
                    return seen
                after = page.after

        every = await pages(queue=queue_name)
        assert [len(page) for page in every] == [3, 3, 1]
        listed = [item.id for item in await work_queue.dead_letters(queue=queue_name)]
        assert [n for page in every for n in page] == listed == [n for _, n in made]
        mine = await pages(tenant=tenant)
        assert [n for page in mine for n in page] == [n for owner, n in made if owner == tenant]
        whole = await work_queue.dead_letter_page(queue=queue_name, limit=len(made))
        assert (len(whole.items), whole.after) == (len(made), None)
        for bad in ("", "x" * 3000, "not a cursor", 7):
            with pytest.raises(InvalidInputError, match="after"):
                await work_queue.dead_letter_page(queue=queue_name, after=bad)  # type: ignore[arg-type]

    async def test_a_purge_of_dead_letters_deletes_one_or_a_tenants_or_all_and_nothing_else(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        other, elsewhere = unique("other"), unique("queue")
        made = [(tenant, queue_name, "k"), (tenant, queue_name, None), (other, queue_name, None)]
        made += [(tenant, elsewhere, None)]
        for n, (owner, queue, key) in enumerate(made):
            await work_queue.enqueue(
                new_item(owner, f"dead {n}", queue=queue, dedupe_key=key), dedupe_ttl=3600
            )
        for _, queue, _ in made:
            held = await work_queue.claim(worker="w", queue=queue)
            assert held is not None
            await work_queue.fail(
                held.id, tenant=held.tenant, worker="w", error="x", retryable=False
            )
        await work_queue.enqueue(new_item(tenant, "alive", queue=queue_name))
        with pytest.raises(InvalidInputError, match="item_id"):
            await work_queue.purge_dead_letters(queue=queue_name, item_id="dead 0")
        with pytest.raises(InvalidInputError, match="queue"):
            await work_queue.purge_dead_letters(queue="")
        purge = work_queue.purge_dead_letters
        assert await purge(queue=queue_name, tenant=tenant, item_id="alive") == 0
        assert await purge(queue=elsewhere, tenant=tenant, item_id="dead 0") == 0
        assert await purge(queue=queue_name, tenant=tenant, item_id="dead 0") == 1
        # Its kept dedupe key went with it: the key queues a new item.
        again = await work_queue.enqueue(
            new_item(tenant, "again", queue=queue_name, dedupe_key="k")
        )
        assert again.id == "again"
        assert await purge(queue=queue_name, tenant=tenant) == 1
        assert await purge(queue=queue_name) == 1
        assert await work_queue.dead_letters(queue=queue_name) == []
        assert [i.id for i in await work_queue.dead_letters(queue=elsewhere)] == ["dead 3"]
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.dead_lettered) == (2, 0)


__all__ = ["NEAR_IDS", "QueueIsolationCases"]
