"""`WorkQueueConformance`: the cases every `WorkQueue` must pass.

Subclass it in a ``Test*`` class and provide one fixture::

    class TestMyQueue(WorkQueueConformance):
        @pytest.fixture
        def work_queue_factory(self) -> Callable[[Clock, QueuePolicy], Awaitable[WorkQueue]]:
            async def make(clock: Clock, policy: QueuePolicy) -> WorkQueue:
                return MyWorkQueue(clock=clock, policy=policy)  # over an empty namespace
            return make

Each factory call must return a queue over an empty namespace; the subclass cleans up.
The suite brings its own ``clock`` (a `ManualClock`) and policy and passes them in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from durably.clock import ManualClock
from durably.errors import InvalidInputError, LeaseLostError, WorkItemNotFoundError
from durably.redaction import MAX_ERROR_CHARS, TRUNCATED_MARKER
from durably.stores.throughput import Minute
from durably.stores.work import QueuePolicy, WorkItem, WorkQueue, WorkState
from durably.testing.queue.batches import QueueBatchCases
from durably.testing.queue.enqueue import QueueEnqueueCases
from durably.testing.queue.fixtures import (
    POLICY,
    START,
    QueueFixtures,
    WorkQueueFactory,
    new_item,
    unique,
)
from durably.testing.queue.isolation import QueueIsolationCases
from durably.testing.queue.order import QueueOrderCases


class QueueLeaseCases(QueueFixtures):
    """Claims, leases, heartbeats, completion, failure, reaping and adoption."""

    async def test_an_empty_queue_hands_out_nothing(
        self, work_queue: WorkQueue, queue_name: str
    ) -> None:
        assert await work_queue.claim(worker="w1", queue=queue_name) is None
        assert await work_queue.claim(worker="w1") is None

    async def test_the_queue_reports_the_policy_it_applies(self, work_queue: WorkQueue) -> None:
        assert work_queue.policy == POLICY

    async def test_a_claim_hands_out_the_item_under_a_lease(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        queued = await work_queue.enqueue(
            new_item(tenant, "job", queue=queue_name, payload={"k": "v ✓"})
        )
        assert (queued.state, queued.attempts, queued.worker) == (WorkState.QUEUED, 0, None)
        assert (queued.enqueued_at, queued.available_at) == (START, START)
        clock.advance(2)
        claimed = await work_queue.claim(worker="w1", queue=queue_name)
        assert claimed is not None
        assert (claimed.id, claimed.tenant, claimed.payload) == ("job", tenant, {"k": "v ✓"})
        assert (claimed.state, claimed.worker, claimed.attempts) == (WorkState.CLAIMED, "w1", 0)
        assert (claimed.claimed_at, claimed.first_claimed_at) == (START + 2, START + 2)
        assert claimed.lease_expires_at == START + 2 + POLICY.lease_seconds
        assert await work_queue.claim(worker="w2", queue=queue_name) is None

    async def test_a_claim_may_ask_for_its_own_lease_but_never_above_the_cap(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        for _ in range(2):
            await work_queue.enqueue(new_item(tenant, queue=queue_name))
        short = await work_queue.claim(worker="w1", queue=queue_name, lease_seconds=3)
        long = await work_queue.claim(worker="w1", queue=queue_name, lease_seconds=1000)
        assert short is not None
        assert long is not None
        assert short.lease_expires_at == START + 3
        assert long.lease_expires_at == START + POLICY.max_lease_seconds

    async def test_ten_concurrent_claims_take_ten_different_items(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        for n in range(10):
            await work_queue.enqueue(new_item(tenant, f"i{n}", queue=queue_name))
        claims = await asyncio.gather(
            *(work_queue.claim(worker=f"w{n}", queue=queue_name) for n in range(10))
        )
        assert all(item is not None for item in claims)
        assert sorted(item.id for item in claims if item) == sorted(f"i{n}" for n in range(10))
        assert {item.worker for item in claims if item} == {f"w{n}" for n in range(10)}

    async def test_of_ten_concurrent_claims_over_three_items_exactly_three_get_one(
        self, work_queue: WorkQueue, queue_name: str
    ) -> None:
        for tenant in ("a", "b", "c"):
            await work_queue.enqueue(new_item(tenant, "same-id", queue=queue_name))
        claims = await asyncio.gather(
            *(work_queue.claim(worker=f"w{n}", queue=queue_name) for n in range(10))
        )
        taken = [item for item in claims if item is not None]
        assert len(taken) == 3
        assert sorted(item.tenant for item in taken) == ["a", "b", "c"]
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed) == (0, 3)

    async def test_completing_is_final(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        done = await work_queue.complete("job", tenant=tenant, worker="w1")
        assert (done.id, done.state) == ("job", WorkState.COMPLETED)
        with pytest.raises(WorkItemNotFoundError):
            await work_queue.complete("job", tenant=tenant, worker="w1")
        with pytest.raises(WorkItemNotFoundError):
            await work_queue.heartbeat("job", tenant=tenant, worker="w1")
        with pytest.raises(WorkItemNotFoundError):
            await work_queue.fail("job", tenant=tenant, worker="w1", error="late")
        assert await work_queue.claim(worker="w2", queue=queue_name) is None
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed, stats.dead_lettered) == (0, 0, 0)

    async def test_a_completed_item_is_gone_for_its_former_holder(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        # Completing ends the item (PostgreSQL deletes it, Redis expires it later): every
        # backing answers a late call as for a missing item, at once and forever.
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        claimed = await work_queue.claim(worker="w1", queue=queue_name)
        assert claimed is not None
        done = await work_queue.complete("job", tenant=tenant, worker="w1")
        assert (done.state, done.worker, done.lease_expires_at) == (
            WorkState.COMPLETED,
            "w1",
            None,
        )
        assert done.claimed_at == claimed.claimed_at
        for worker in ("w1", "w2"):
            for call in _holder_calls(work_queue, "job", tenant, worker):
                with pytest.raises(WorkItemNotFoundError) as missing:
                    await call()
                assert (missing.value.item_id, missing.value.tenant) == ("job", tenant)

    async def test_of_concurrent_completions_by_the_holder_exactly_one_succeeds(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        results = await asyncio.gather(
            *(work_queue.complete("job", tenant=tenant, worker="w1") for _ in range(5)),
            return_exceptions=True,
        )
        assert sum(isinstance(r, WorkItem) for r in results) == 1
        assert all(
            isinstance(r, WorkItem | LeaseLostError | WorkItemNotFoundError) for r in results
        )

    async def test_a_lapsed_claim_is_reaped_with_the_attempt_counted_and_returns_after_backoff(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(POLICY.lease_seconds - 1)
        assert await work_queue.reap() == []
        clock.advance(1)  # the lease lapses at exactly lease_expires_at
        (reaped,) = await work_queue.reap()
        assert (reaped.id, reaped.tenant, reaped.state, reaped.attempts) == (
            "job",
            tenant,
            WorkState.QUEUED,
            1,
        )
        assert (reaped.worker, reaped.lease_expires_at, reaped.failures) == (
            None,
            None,
            ("lease expired",),
        )
        assert reaped.available_at == clock.now() + POLICY.backoff_for(1)
        assert await work_queue.reap() == []
        assert await work_queue.claim(worker="w2", queue=queue_name) is None
        clock.advance(POLICY.backoff_for(1))
        again = await work_queue.claim(worker="w2", queue=queue_name)
        assert again is not None
        assert (again.id, again.attempts, again.failures) == ("job", 1, ("lease expired",))
        assert again.first_claimed_at == START
        assert again.claimed_at == START + POLICY.lease_seconds + POLICY.backoff_for(1)
        assert (await work_queue.stats(queue=queue_name)).reaped == 1

    async def test_a_lease_kept_alive_by_heartbeats_is_never_reaped(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(8)
        beat = await work_queue.heartbeat("job", tenant=tenant, worker="w1")
        assert beat.lease_expires_at == START + 8 + POLICY.lease_seconds
        assert (beat.state, beat.worker) == (WorkState.CLAIMED, "w1")
        clock.advance(8)  # past the claim's own lease
        assert await work_queue.reap() == []
        beat = await work_queue.heartbeat("job", tenant=tenant, worker="w1")
        assert beat.lease_expires_at == START + POLICY.max_lease_seconds  # never past the cap
        clock.advance(8)
        assert await work_queue.reap() == []
        done = await work_queue.complete("job", tenant=tenant, worker="w1")
        assert (done.state, done.attempts) == (WorkState.COMPLETED, 0)

    async def test_concurrent_reapers_settle_each_lapsed_item_once(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        for n in range(3):
            await work_queue.enqueue(new_item(tenant, f"i{n}", queue=queue_name))
            await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(POLICY.lease_seconds)
        reaped = await asyncio.gather(*(work_queue.reap() for _ in range(5)))
        assert sorted(item.id for items in reaped for item in items) == ["i0", "i1", "i2"]
        clock.advance(POLICY.backoff_for(1))
        again = [await work_queue.claim(worker="w2", queue=queue_name) for _ in range(3)]
        assert [item.attempts for item in again if item] == [1, 1, 1]
        assert (await work_queue.stats(queue=queue_name)).reaped == 3

    async def test_a_reap_racing_the_holder_of_a_lapsed_lease_is_the_only_winner(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(POLICY.lease_seconds)
        results = await asyncio.gather(
            work_queue.complete("job", tenant=tenant, worker="w1"),
            work_queue.reap(),
            work_queue.heartbeat("job", tenant=tenant, worker="w1"),
            work_queue.fail("job", tenant=tenant, worker="w1", error="late"),
            return_exceptions=True,
        )
        complete, reaped, heartbeat, fail = results
        assert isinstance(reaped, list)
        assert [item.id for item in reaped] == ["job"]
        for lost in (complete, heartbeat, fail):
            assert isinstance(lost, LeaseLostError)
            assert lost.reason in ("expired", "taken")
        clock.advance(POLICY.backoff_for(1))
        again = await work_queue.claim(worker="w2", queue=queue_name)
        assert again is not None
        assert (again.attempts, again.failures) == (1, ("lease expired",))

    async def test_a_reap_racing_a_live_heartbeat_leaves_the_claim_alone(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(POLICY.lease_seconds - 0.5)
        results = await asyncio.gather(
            *(work_queue.reap() for _ in range(3)),
            *(work_queue.heartbeat("job", tenant=tenant, worker="w1") for _ in range(3)),
        )
        assert results[:3] == [[], [], []]
        clock.advance(1)  # past the first lease, inside the renewed one
        assert await work_queue.reap() == []
        done = await work_queue.complete("job", tenant=tenant, worker="w1")
        assert (done.state, done.attempts, done.failures) == (WorkState.COMPLETED, 0, ())

    async def test_a_reaped_worker_is_refused_as_taken(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(POLICY.lease_seconds)
        await work_queue.reap()
        for call in _holder_calls(work_queue, "job", tenant, "w1"):
            with pytest.raises(LeaseLostError) as lost:
                await call()
            assert (lost.value.reason, lost.value.holder) == ("taken", None)
        clock.advance(POLICY.backoff_for(1))
        assert await work_queue.claim(worker="w2", queue=queue_name) is not None
        for call in _holder_calls(work_queue, "job", tenant, "w1"):
            with pytest.raises(LeaseLostError) as lost:
                await call()
            assert (lost.value.reason, lost.value.holder, lost.value.worker) == (
                "taken",
                "w2",
                "w1",
            )
        assert not lost.value.retryable
        done = await work_queue.complete("job", tenant=tenant, worker="w2")
        assert (done.state, done.attempts) == (WorkState.COMPLETED, 1)

    async def test_a_lapsed_lease_not_yet_reaped_is_refused_as_expired(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(POLICY.lease_seconds)
        for call in _holder_calls(work_queue, "job", tenant, "w1"):
            with pytest.raises(LeaseLostError) as lost:
                await call()
            assert lost.value.reason == "expired"
        assert (await work_queue.stats(queue=queue_name)).claimed == 1
        assert [item.id for item in await work_queue.reap()] == ["job"]

    async def test_a_heartbeat_past_the_lease_cap_is_refused_as_capped(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(8)
        await work_queue.heartbeat("job", tenant=tenant, worker="w1")
        clock.advance(8)
        await work_queue.heartbeat("job", tenant=tenant, worker="w1")
        clock.advance(8)  # 24 s: the lease may only run to the 25 s cap
        beat = await work_queue.heartbeat("job", tenant=tenant, worker="w1")
        assert beat.lease_expires_at == START + POLICY.max_lease_seconds
        clock.advance(1)
        with pytest.raises(LeaseLostError) as lost:
            await work_queue.heartbeat("job", tenant=tenant, worker="w1")
        assert lost.value.reason == "capped"

    async def test_the_wrong_tenant_or_a_missing_item_is_not_found(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        for item_id, owner in (("job", "someone-else"), ("missing", tenant)):
            for call in _holder_calls(work_queue, item_id, owner, "w1"):
                with pytest.raises(WorkItemNotFoundError):
                    await call()
        held = await work_queue.heartbeat("job", tenant=tenant, worker="w1")
        assert held.worker == "w1"

    async def test_failures_retry_after_a_backoff_that_doubles_up_to_the_cap(
        self, work_queue_factory: WorkQueueFactory, clock: ManualClock, tenant: str
    ) -> None:
        policy = QueuePolicy(max_attempts=10, backoff_seconds=1.0, backoff_cap_seconds=4.0)
        work_queue = await work_queue_factory(clock, policy)
        await work_queue.enqueue(new_item(tenant, "job"))
        for attempt, delay in enumerate((1.0, 2.0, 4.0, 4.0, 4.0), start=1):
            assert await work_queue.claim(worker="w1") is not None
            failed = await work_queue.fail("job", tenant=tenant, worker="w1", error=f"e{attempt}")
            assert (failed.state, failed.attempts, failed.worker) == (
                WorkState.QUEUED,
                attempt,
                None,
            )
            assert failed.available_at == clock.now() + delay
            assert failed.failures == tuple(f"e{n}" for n in range(1, attempt + 1))
            clock.advance(delay - 0.5)
            assert await work_queue.claim(worker="w1") is None
            clock.advance(0.5)

    async def test_a_settled_failure_leaves_the_item_unheld_with_no_claim_instant(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        # A requeue and a dead letter end the holding: the item keeps its first claim, but
        # no worker, lease or current claim instant (as the next claim sets a new one).
        for item_id in ("requeued", "dead"):
            await work_queue.enqueue(new_item(tenant, item_id, queue=queue_name))
            await work_queue.claim(worker="w1", queue=queue_name)
        clock.advance(1)
        requeued = await work_queue.fail("requeued", tenant=tenant, worker="w1", error="e")
        dead = await work_queue.fail("dead", tenant=tenant, worker="w1", error="e", retryable=False)
        (listed,) = await work_queue.dead_letters(tenant=tenant, queue=queue_name)
        clock.advance(POLICY.backoff_for(1))
        reclaimed = await work_queue.claim(worker="w2", queue=queue_name)
        assert reclaimed is not None
        assert (reclaimed.id, reclaimed.claimed_at) == (
            "requeued",
            START + 1 + POLICY.backoff_for(1),
        )
        for item in (requeued, dead, listed):
            assert (item.worker, item.lease_expires_at, item.claimed_at) == (None, None, None)
            assert item.first_claimed_at == START

    async def test_a_failure_that_is_not_retryable_dead_letters_at_once(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        dead = await work_queue.fail(
            "job", tenant=tenant, worker="w1", error="bad input", retryable=False
        )
        assert (dead.state, dead.attempts, dead.failures) == (
            WorkState.DEAD_LETTERED,
            1,
            ("bad input",),
        )
        clock.advance(1000)
        assert await work_queue.claim(worker="w1", queue=queue_name) is None
        assert [item.id for item in await work_queue.dead_letters(tenant=tenant)] == ["job"]

    async def test_a_failure_text_no_backing_could_store_is_kept_mended(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        with pytest.raises(InvalidInputError, match="error"):
            await work_queue.fail(
                "job",
                tenant=tenant,
                worker="w1",
                error=None,  # type: ignore[arg-type]
                retryable=False,
            )
        held = await work_queue.heartbeat("job", tenant=tenant, worker="w1")
        assert (held.state, held.attempts) == (WorkState.CLAIMED, 0)
        dead = await work_queue.fail(
            "job", tenant=tenant, worker="w1", error="boom\x00 \ud800 é", retryable=False
        )
        assert (dead.state, dead.failures) == (WorkState.DEAD_LETTERED, ("boom\ufffd \ufffd é",))
        (stored,) = await work_queue.dead_letters(tenant=tenant)
        assert stored.failures == ("boom\ufffd \ufffd é",)

    async def test_a_huge_failure_text_is_stored_cut_to_the_limit_with_a_marker(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        huge = "x" * (20 << 20)  # 20 MiB
        cut = huge[: MAX_ERROR_CHARS - len(TRUNCATED_MARKER)] + TRUNCATED_MARKER
        dead = await work_queue.fail("job", tenant=tenant, worker="w1", error=huge, retryable=False)
        (stored,) = await work_queue.dead_letters(tenant=tenant)
        assert dead.failures == stored.failures == (cut,)

    async def test_exhausted_attempts_dead_letter_the_item(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        for attempt in range(1, POLICY.max_attempts + 1):
            clock.advance(POLICY.backoff_cap_seconds)
            assert await work_queue.claim(worker="w1", queue=queue_name) is not None
            settled = await work_queue.fail("job", tenant=tenant, worker="w1", error=str(attempt))
        assert (settled.state, settled.attempts) == (WorkState.DEAD_LETTERED, POLICY.max_attempts)
        clock.advance(1000)
        assert await work_queue.claim(worker="w1", queue=queue_name) is None
        (letter,) = await work_queue.dead_letters(tenant=tenant, queue=queue_name)
        assert (letter.id, letter.failures) == ("job", ("1", "2", "3"))
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed, stats.dead_lettered) == (0, 0, 1)

    async def test_reaping_at_the_attempt_cap_dead_letters_the_item(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        for _ in range(POLICY.max_attempts):
            clock.advance(POLICY.backoff_cap_seconds)
            assert await work_queue.claim(worker="w1", queue=queue_name) is not None
            clock.advance(POLICY.lease_seconds)
            (reaped,) = await work_queue.reap()
        assert (reaped.state, reaped.attempts) == (WorkState.DEAD_LETTERED, POLICY.max_attempts)
        (letter,) = await work_queue.dead_letters(tenant=tenant)
        assert (letter.state, letter.attempts) == (WorkState.DEAD_LETTERED, POLICY.max_attempts)
        assert letter.failures == ("lease expired",) * POLICY.max_attempts

    async def test_adopt_gives_back_at_once_everything_a_worker_held(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        for n in range(3):
            await work_queue.enqueue(new_item(tenant, f"i{n}", queue=queue_name))
        held = [await work_queue.claim(worker="restarted", queue=queue_name) for _ in range(2)]
        other = await work_queue.claim(worker="other", queue=queue_name)
        assert other is not None
        adopted = await work_queue.adopt(worker="restarted")
        assert sorted(item.id for item in adopted) == sorted(i.id for i in held if i)
        for given_back in adopted:
            assert (given_back.state, given_back.worker, given_back.attempts) == (
                WorkState.QUEUED,
                None,
                1,
            )
            assert given_back.failures == ("adopted after restart",)
        assert await work_queue.adopt(worker="restarted") == []
        back = [await work_queue.claim(worker="new", queue=queue_name) for _ in range(2)]
        assert all(item is not None for item in back)
        for item in back:
            assert item is not None
            assert (item.attempts, item.failures) == (1, ("adopted after restart",))
        assert await work_queue.heartbeat(other.id, tenant=tenant, worker="other")
        with pytest.raises(LeaseLostError) as lost:
            await work_queue.complete(back[0].id, tenant=tenant, worker="restarted")  # type: ignore[union-attr]
        assert (lost.value.reason, lost.value.holder) == ("taken", "new")

    async def test_adopting_an_item_at_its_attempt_cap_dead_letters_it(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        for _ in range(POLICY.max_attempts - 1):
            assert await work_queue.claim(worker="w1", queue=queue_name) is not None
            assert len(await work_queue.adopt(worker="w1")) == 1
        assert await work_queue.claim(worker="w1", queue=queue_name) is not None
        (adopted,) = await work_queue.adopt(worker="w1")
        assert (adopted.state, adopted.attempts) == (WorkState.DEAD_LETTERED, POLICY.max_attempts)
        (letter,) = await work_queue.dead_letters(tenant=tenant, queue=queue_name)
        assert (letter.id, letter.attempts) == ("job", POLICY.max_attempts)
        assert await work_queue.claim(worker="w1", queue=queue_name) is None
        clock.advance(1000)
        assert await work_queue.claim(worker="w1", queue=queue_name) is None

    async def test_finished_items_are_counted_in_their_queues_minute_then_forgotten(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        other = unique("queue")
        minute = int(clock.now() // 60)
        for n in range(5):
            await work_queue.enqueue(new_item(tenant, f"job {n}", queue=queue_name))
        await work_queue.enqueue(new_item(tenant, "elsewhere", queue=other))

        async def claimed(queue: str = queue_name) -> WorkItem:
            held = await work_queue.claim(worker="w", queue=queue)
            assert held is not None
            return held

        await work_queue.complete((await claimed()).id, tenant=tenant, worker="w")
        pair = [(await claimed()).id, (await claimed()).id]
        complete_many = getattr(work_queue, "complete_many", None)  # the batched write too
        if complete_many is not None:
            await complete_many([(i, tenant) for i in pair], worker="w")
        else:
            for item_id in pair:
                await work_queue.complete(item_id, tenant=tenant, worker="w")
        await work_queue.fail((await claimed()).id, tenant=tenant, worker="w", error="again")
        dead = await claimed()
        await work_queue.fail(dead.id, tenant=tenant, worker="w", error="no", retryable=False)
        await work_queue.complete((await claimed(other)).id, tenant=tenant, worker="w")
        found = await work_queue.finished_per_minute(queues=[queue_name, other, unique("none")])
        assert found == {queue_name: [Minute(minute, 3, 1)], other: [Minute(minute, 1, 0)]}
        # Sixteen minutes on, the minute's slot counts afresh, and the old one is not read.
        clock.advance(16 * 60)
        assert await work_queue.finished_per_minute(queues=[queue_name]) == {}
        await work_queue.enqueue(new_item(tenant, "later", queue=queue_name))
        await work_queue.complete((await claimed()).id, tenant=tenant, worker="w")
        later = await work_queue.finished_per_minute(queues=[queue_name])
        assert later == {queue_name: [Minute(minute + 16, 1, 0)]}
        for bad in ("one-string", [""], [f"q{n}" for n in range(101)]):
            with pytest.raises(InvalidInputError, match="queues"):
                await work_queue.finished_per_minute(queues=bad)


def _holder_calls(
    work_queue: WorkQueue, item_id: str, tenant: str, worker: str
) -> list[Callable[[], Awaitable[WorkItem]]]:
    """The three calls only the lease holder may make."""
    return [
        lambda: work_queue.heartbeat(item_id, tenant=tenant, worker=worker),
        lambda: work_queue.complete(item_id, tenant=tenant, worker=worker),
        lambda: work_queue.fail(item_id, tenant=tenant, worker=worker, error="x"),
    ]


class WorkQueueConformance(
    QueueLeaseCases, QueueEnqueueCases, QueueOrderCases, QueueIsolationCases, QueueBatchCases
):
    """Every case a `WorkQueue` must pass; provide ``work_queue_factory``."""


__all__ = ["WorkQueueConformance", "WorkQueueFactory"]
