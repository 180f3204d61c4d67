"""Enqueue cases of `WorkQueueConformance`: idempotence, delays, stats, ids and input."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from durably.clock import ManualClock
from durably.errors import InvalidInputError, WorkItemNotFoundError
from durably.stores.work import DEAD_LETTERS_MOST, WorkItem, WorkQueue, WorkState
from durably.testing.queue.fixtures import POLICY, START, QueueFixtures, new_item, unique
from durably.testing.refused import UNSTORABLE_TEXTS, UNUSABLE_IDS

AWKWARD_IDS = (
    "{braces}",
    "{4:acme}",
    "a:b",
    "a",
    'quote"d',
    "it's",
    "semi;colon",
    "100%",
    "with space",
    "emoji 🚀",
    "'; DROP TABLE work; --",
    "*",
)


class QueueEnqueueCases(QueueFixtures):
    """Idempotent enqueue, delays, stats, isolation and refused input."""

    async def test_enqueueing_a_live_id_again_returns_the_live_item_and_counts_a_duplicate(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name, payload={"v": "1"}))
        await work_queue.claim(worker="w1", queue=queue_name)
        await work_queue.fail("job", tenant=tenant, worker="w1", error="boom")
        clock.advance(0.5)
        again = await work_queue.enqueue(
            new_item(tenant, "job", queue=queue_name, payload={"v": "2"})
        )
        assert (again.payload, again.attempts, again.state) == ({"v": "1"}, 1, WorkState.QUEUED)
        assert again.enqueued_at == START
        clock.advance(0.5)
        assert await work_queue.claim(worker="w1", queue=queue_name) is not None
        held = await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        assert (held.state, held.worker, held.attempts) == (WorkState.CLAIMED, "w1", 1)
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed, stats.duplicates_suppressed) == (0, 1, 2)

    async def test_a_live_dedupe_key_suppresses_a_second_item(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        first = await work_queue.enqueue(
            new_item(tenant, "first", queue=queue_name, dedupe_key="order-7")
        )
        second = await work_queue.enqueue(
            new_item(tenant, "second", queue=queue_name, dedupe_key="order-7")
        )
        assert second == first
        claimed = await work_queue.claim(worker="w1", queue=queue_name)
        assert claimed is not None
        assert claimed.id == "first"
        third = await work_queue.enqueue(
            new_item(tenant, "third", queue=queue_name, dedupe_key="order-7")
        )
        assert (third.id, third.state) == ("first", WorkState.CLAIMED)
        assert await work_queue.claim(worker="w2", queue=queue_name) is None
        assert (await work_queue.stats(queue=queue_name)).duplicates_suppressed == 2

    async def test_a_dedupe_key_belongs_to_one_tenant_and_one_queue(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        other_queue = unique("queue")
        await work_queue.enqueue(new_item(tenant, "a", queue=queue_name, dedupe_key="k"))
        b = await work_queue.enqueue(new_item(tenant, "b", queue=other_queue, dedupe_key="k"))
        c = await work_queue.enqueue(new_item(unique("t"), "c", queue=queue_name, dedupe_key="k"))
        assert (b.id, c.id) == ("b", "c")
        assert (await work_queue.stats(queue=queue_name)).depth == 2
        assert (await work_queue.stats(queue=queue_name)).duplicates_suppressed == 0

    async def test_a_duplicate_is_counted_on_the_queue_of_the_item_it_found(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        other_queue = unique("queue")
        await work_queue.enqueue(new_item(tenant, "job", queue=other_queue))
        found = await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        assert (found.id, found.queue) == ("job", other_queue)
        assert (await work_queue.stats(queue=other_queue)).duplicates_suppressed == 1
        assert (await work_queue.stats(queue=queue_name)).duplicates_suppressed == 0

    async def test_concurrent_enqueues_of_one_dedupe_key_make_one_item(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        results = await asyncio.gather(
            *(
                work_queue.enqueue(new_item(tenant, f"i{n}", queue=queue_name, dedupe_key="k"))
                for n in range(10)
            )
        )
        assert len({item.id for item in results}) == 1
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.duplicates_suppressed) == (1, 9)

    async def test_a_terminal_item_frees_its_id_and_its_dedupe_key(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name, dedupe_key="k"))
        await work_queue.claim(worker="w1", queue=queue_name)
        await work_queue.complete("job", tenant=tenant, worker="w1")
        clock.advance(1)
        again = await work_queue.enqueue(
            new_item(tenant, "job", queue=queue_name, payload={"round": "2"})
        )
        assert (again.state, again.attempts, again.enqueued_at) == (WorkState.QUEUED, 0, START + 1)
        keyed = await work_queue.enqueue(
            new_item(tenant, "other", queue=queue_name, dedupe_key="k")
        )
        assert keyed.id == "other"
        await work_queue.claim(worker="w1", queue=queue_name)
        await work_queue.claim(worker="w1", queue=queue_name)
        await work_queue.fail("other", tenant=tenant, worker="w1", error="no", retryable=False)
        revived = await work_queue.enqueue(
            new_item(tenant, "third", queue=queue_name, dedupe_key="k")
        )
        assert (revived.id, revived.state) == ("third", WorkState.QUEUED)
        assert (await work_queue.stats(queue=queue_name)).duplicates_suppressed == 0

    async def test_a_delayed_item_is_not_claimed_before_its_time(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        delayed = await work_queue.enqueue(
            new_item(tenant, "later", queue=queue_name, available_at=START + 60)
        )
        assert (delayed.enqueued_at, delayed.available_at) == (START, START + 60)
        clock.advance(59.5)
        assert await work_queue.claim(worker="w1", queue=queue_name) is None
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.oldest_age_seconds) == (1, 0.0)
        clock.advance(0.5)
        claimed = await work_queue.claim(worker="w1", queue=queue_name)
        assert claimed is not None
        assert claimed.id == "later"

    async def test_an_enqueued_item_keeps_its_attempts_and_failures_and_starts_unheld(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        carried = new_item(
            tenant,
            "carried",
            queue=queue_name,
            attempts=2,
            failures=("first", "second"),
            state=WorkState.DEAD_LETTERED,
            worker="old",
            lease_expires_at=START - 5,
            first_claimed_at=START - 60,
            claimed_at=START - 30,
        )
        queued = await work_queue.enqueue(carried)
        claimed = await work_queue.claim(worker="w1", queue=queue_name)
        assert claimed is not None
        for item in (queued, claimed):
            assert (item.attempts, item.failures) == (2, ("first", "second"))
        assert (queued.state, queued.worker, queued.lease_expires_at) == (
            WorkState.QUEUED,
            None,
            None,
        )
        assert (queued.first_claimed_at, queued.claimed_at) == (None, None)
        assert claimed.first_claimed_at == START

    async def test_stats_count_depth_claims_dead_letters_and_oldest_age(
        self, work_queue: WorkQueue, tenant: str, queue_name: str, clock: ManualClock
    ) -> None:
        empty = await work_queue.stats(queue=queue_name)
        assert (empty.depth, empty.claimed, empty.dead_lettered) == (0, 0, 0)
        assert (empty.oldest_age_seconds, empty.reaped, empty.duplicates_suppressed) == (0, 0, 0)
        for n in range(4):
            await work_queue.enqueue(new_item(tenant, f"i{n}", queue=queue_name))
            clock.advance(1)
        await work_queue.enqueue(
            new_item(tenant, "later", queue=queue_name, available_at=START + 99)
        )
        await work_queue.enqueue(new_item(tenant, "i0", queue=queue_name))
        await work_queue.enqueue(new_item(tenant, "elsewhere", queue=unique("queue")))
        await work_queue.claim(worker="w1", queue=queue_name)  # i0
        await work_queue.claim(worker="w1", queue=queue_name)  # i1
        await work_queue.fail("i1", tenant=tenant, worker="w1", error="x", retryable=False)
        clock.advance(2)
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.claimed, stats.dead_lettered) == (3, 1, 1)
        assert stats.oldest_age_seconds == pytest.approx(4.0)  # i2, due at START + 2
        assert (stats.reaped, stats.duplicates_suppressed) == (0, 1)
        clock.advance(POLICY.lease_seconds)
        await work_queue.reap()
        after = await work_queue.stats(queue=queue_name)
        assert (after.depth, after.claimed, after.reaped) == (4, 0, 1)

    async def test_queues_are_isolated_by_name(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        other = f"{queue_name}:other"
        await work_queue.enqueue(new_item(tenant, "here", queue=queue_name))
        await work_queue.enqueue(new_item(tenant, "there", queue=other))
        there = await work_queue.claim(worker="w1", queue=other)
        assert there is not None
        assert there.id == "there"
        assert await work_queue.claim(worker="w1", queue=other) is None
        here = await work_queue.claim(worker="w1", queue=queue_name)
        assert here is not None
        assert here.id == "here"
        assert (await work_queue.stats(queue=other)).claimed == 1

    async def test_the_same_id_in_two_tenants_is_two_items(
        self, work_queue: WorkQueue, queue_name: str
    ) -> None:
        a, b = unique("a"), unique("b")
        for tenant in (a, b):
            await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        first = await work_queue.claim(worker="w1", queue=queue_name)
        second = await work_queue.claim(worker="w2", queue=queue_name)
        assert first is not None
        assert second is not None
        assert {first.tenant, second.tenant} == {a, b}
        await work_queue.complete("job", tenant=first.tenant, worker="w1")
        with pytest.raises(WorkItemNotFoundError):
            await work_queue.complete("job", tenant=unique("c"), worker="w2")
        held = await work_queue.heartbeat("job", tenant=second.tenant, worker="w2")
        assert held.state is WorkState.CLAIMED

    async def test_awkward_ids_address_exactly_themselves(
        self, work_queue: WorkQueue, clock: ManualClock
    ) -> None:
        # An id is unique within its tenant across queues, so each queue is drained (which
        # frees the ids) before the next one reuses them.
        for queue in AWKWARD_IDS[:4]:
            for tenant in AWKWARD_IDS[:4]:
                for item_id in AWKWARD_IDS:
                    marker = f"{queue}|{tenant}|{item_id}"
                    await work_queue.enqueue(
                        new_item(tenant, item_id, queue=queue, payload={"m": marker})
                    )
            seen: set[tuple[str, str]] = set()
            while (item := await work_queue.claim(worker="w 🚀", queue=queue)) is not None:
                assert item.payload == {"m": f"{queue}|{item.tenant}|{item.id}"}
                done = await work_queue.complete(item.id, tenant=item.tenant, worker="w 🚀")
                assert (done.id, done.tenant, done.queue) == (item.id, item.tenant, queue)
                seen.add((item.tenant, item.id))
            assert seen == {(t, i) for t in AWKWARD_IDS[:4] for i in AWKWARD_IDS}

    async def test_a_live_dedupe_key_answers_a_requeue_and_the_dead_letter_stays(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "dead", queue=queue_name, dedupe_key="k"))
        await work_queue.claim(worker="w1", queue=queue_name)
        await work_queue.fail("dead", tenant=tenant, worker="w1", error="x", retryable=False)
        await work_queue.enqueue(new_item(tenant, "live", queue=queue_name, dedupe_key="k"))
        # What `durably queue requeue` sends: the dead letter's id again, with its key.
        answer = await work_queue.enqueue(
            new_item(tenant, "dead", queue=queue_name, dedupe_key="k")
        )
        assert answer.id == "live"
        dead = await work_queue.dead_letters(tenant=tenant, queue=queue_name)
        assert [item.id for item in dead] == ["dead"]
        assert (await work_queue.stats(queue=queue_name)).dead_lettered == 1

    async def test_an_item_that_skipped_validation_is_checked_before_any_io(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        unchecked: list[dict[str, Any]] = [
            {"priority": 99},
            {"priority": "high"},
            {"attempts": -1},
            {"attempts": "1"},
        ]
        for fields in unchecked:
            item = WorkItem.model_construct(
                **{**new_item(tenant, queue=queue_name).model_dump(), **fields}
            )
            with pytest.raises(InvalidInputError):
                await work_queue.enqueue(item)
        assert (await work_queue.stats(queue=queue_name)).depth == 0

    async def test_a_failure_whose_retryable_is_not_a_bool_is_refused_and_changes_nothing(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "job", queue=queue_name))
        await work_queue.claim(worker="w1", queue=queue_name)
        for bad in ("no", 0, None):
            with pytest.raises(InvalidInputError, match="retryable"):
                await work_queue.fail(
                    "job",
                    tenant=tenant,
                    worker="w1",
                    error="x",
                    retryable=bad,  # type: ignore[arg-type]
                )
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.claimed, stats.dead_lettered) == (1, 0)

    async def test_dead_letters_are_listed_oldest_first_per_tenant_and_queue(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        other_queue = unique("queue")
        for item_id, queue in (("d1", queue_name), ("d2", other_queue), ("d3", queue_name)):
            await work_queue.enqueue(new_item(tenant, item_id, queue=queue))
            await work_queue.claim(worker="w1", queue=queue)
            await work_queue.fail(item_id, tenant=tenant, worker="w1", error="x", retryable=False)
        await work_queue.enqueue(new_item(unique("t"), "theirs", queue=queue_name))
        everything = await work_queue.dead_letters(tenant=tenant)
        assert [item.id for item in everything] == ["d1", "d2", "d3"]
        assert [item.id for item in await work_queue.dead_letters(tenant=tenant, limit=2)] == [
            "d1",
            "d2",
        ]
        in_queue = await work_queue.dead_letters(tenant=tenant, queue=queue_name)
        assert [item.id for item in in_queue] == ["d1", "d3"]
        assert await work_queue.dead_letters(tenant=unique("nobody")) == []

    async def test_a_dead_letters_limit_outside_one_to_the_most_is_refused_before_any_io(
        self, work_queue: WorkQueue, tenant: str
    ) -> None:
        for bad in (0, -1, DEAD_LETTERS_MOST + 1, 10**30, 2.5, True):
            with pytest.raises(InvalidInputError, match="limit"):
                await work_queue.dead_letters(tenant=tenant, limit=bad)  # type: ignore[arg-type]
        assert await work_queue.dead_letters(tenant=tenant, limit=DEAD_LETTERS_MOST) == []

    async def test_invalid_input_is_refused_before_any_io(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        for bad in UNUSABLE_IDS:
            for fields in ({"id": bad}, {"tenant": bad}, {"queue": bad}, {"dedupe_key": bad}):
                with pytest.raises(ValueError):
                    WorkItem(**{"id": "x", "tenant": "t", **fields})  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError):
                await work_queue.claim(worker=bad, queue=queue_name)
            with pytest.raises(InvalidInputError):
                await work_queue.claim(worker="w1", queue=bad)
            with pytest.raises(InvalidInputError):
                await work_queue.heartbeat(bad, tenant=tenant, worker="w1")
            with pytest.raises(InvalidInputError):
                await work_queue.complete("x", tenant=bad, worker="w1")
            with pytest.raises(InvalidInputError):
                await work_queue.fail("x", tenant=tenant, worker=bad, error="e")
            with pytest.raises(InvalidInputError):
                await work_queue.adopt(worker=bad)
            with pytest.raises(InvalidInputError):
                await work_queue.dead_letters(tenant=bad)
        await work_queue.enqueue(new_item(tenant, "x", queue=queue_name))
        for lease in (0, -1.0, math.nan, math.inf):
            with pytest.raises(ValueError):
                await work_queue.claim(worker="w1", queue=queue_name, lease_seconds=lease)
        assert (await work_queue.stats(queue=queue_name)).depth == 1

    async def test_an_availability_that_is_not_a_finite_instant_is_refused_and_stores_nothing(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        # A NaN (or infinite) instant cannot be ordered against the clock: a store that
        # took it kept an item no claim could ever take, holding its id for good.
        for instant in (math.nan, math.inf, -math.inf):
            with pytest.raises(InvalidInputError, match="available_at"):
                await work_queue.enqueue(
                    new_item(tenant, "x", queue=queue_name, available_at=instant)
                )
        fresh = await work_queue.enqueue(new_item(tenant, "x", queue=queue_name))
        assert (fresh.state, fresh.available_at) == (WorkState.QUEUED, START)
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.duplicates_suppressed) == (1, 0)
        claimed = await work_queue.claim(worker="w1", queue=queue_name)
        assert claimed is not None
        assert claimed.id == "x"

    async def test_a_payload_no_backing_could_store_is_refused_and_changes_nothing(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        await work_queue.enqueue(new_item(tenant, "kept", queue=queue_name, payload={"v": "1"}))
        unstorable: list[dict[Any, Any]] = [{"k": 1}, {1: "v"}]
        for text in UNSTORABLE_TEXTS:
            unstorable += [{"k": text}, {text: "v"}]
        for payload in unstorable:
            for item_id in ("kept", "fresh"):
                # A model built without validation reaches the store as it is.
                item = WorkItem.model_construct(
                    id=item_id, tenant=tenant, queue=queue_name, payload=payload
                )
                with pytest.raises(InvalidInputError, match="payload"):
                    await work_queue.enqueue(item)
        stats = await work_queue.stats(queue=queue_name)
        assert (stats.depth, stats.duplicates_suppressed) == (1, 0)
        claimed = await work_queue.claim(worker="w1", queue=queue_name)
        assert claimed is not None
        assert (claimed.id, claimed.payload) == ("kept", {"v": "1"})

    async def test_payloads_keep_quotes_escapes_and_non_ascii_exactly(
        self, work_queue: WorkQueue, tenant: str, queue_name: str
    ) -> None:
        payload = {
            'quote"d': 'back\\slash "and" quotes',
            "lines": "one\ntwo\tthree\r\x01\x1f",
            "emoji 🚀": "é, ß, 中文, 🚀",
            "": "",
            "json": '{"not": "parsed"}',
        }
        await work_queue.enqueue(new_item(tenant, "odd", queue=queue_name, payload=payload))
        claimed = await work_queue.claim(worker="w1", queue=queue_name)
        assert claimed is not None
        assert claimed.payload == payload  # (key order is not kept: jsonb sorts keys)


__all__ = ["AWKWARD_IDS", "QueueEnqueueCases"]
