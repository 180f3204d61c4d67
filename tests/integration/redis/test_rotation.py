"""Redis queue layout: where a tenant's turn is kept while it is queued and after it leaves
(the rotation sets, then the turns hash), and which item fields an enqueue stores."""

from __future__ import annotations

from typing import Any

import pytest

from durably import ManualClock, WorkItem, WorkPriority, WorkState
from durably.redis import RedisWorkQueue, keys
from tests.redis_service import namespace_for

pytestmark = pytest.mark.redis


async def _take(queue: RedisWorkQueue) -> tuple[str, str]:
    item = await queue.claim(worker="w", queue="q")
    assert item is not None
    await queue.complete(item.id, tenant=item.tenant, worker="w")
    return item.tenant, item.id


async def test_a_tenant_that_empties_out_and_comes_back_keeps_the_turn_it_had(
    any_redis: Any,
) -> None:
    clock = ManualClock(1000.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=namespace_for(any_redis))
    for tenant, item_id in (("a", "a0"), ("b", "b0"), ("b", "b1"), ("c", "c0"), ("c", "c1")):
        await queue.enqueue(WorkItem(id=item_id, tenant=tenant, queue="q"))
        clock.advance(1)
    # a, b, c are served once each; a leaves the rotation (nothing queued) after its turn.
    assert [await _take(queue) for _ in range(3)] == [("a", "a0"), ("b", "b0"), ("c", "c0")]
    # a comes back: it was served before b and c, so it goes before them again, not behind
    # them (it kept its turn) and not ahead of a tenant never served (that would be 0).
    await queue.enqueue(WorkItem(id="a1", tenant="a", queue="q"))
    await queue.enqueue(WorkItem(id="d0", tenant="d", queue="q"))
    taken = [await _take(queue) for _ in range(4)]
    assert taken == [("d", "d0"), ("a", "a1"), ("b", "b1"), ("c", "c1")]


async def test_a_fresh_item_stores_no_attempts_or_availability_it_does_not_need(
    any_redis: Any,
) -> None:
    # An unset attempts count reads as 0 and an unset availability as the enqueue time:
    # every item read answers both, before and after a claim.
    clock = ManualClock(1000.0)
    ns = namespace_for(any_redis)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=ns)
    queued = await queue.enqueue(WorkItem(id="i", tenant="t", queue="q"))
    assert (queued.attempts, queued.available_at, queued.enqueued_at) == (0, 1000.0, 1000.0)
    again = await queue.enqueue(WorkItem(id="i", tenant="t", queue="q"))  # the live one
    assert (again.attempts, again.available_at, again.enqueued_at) == (0, 1000.0, 1000.0)
    claimed = await queue.claim(worker="w", queue="q")
    assert claimed is not None
    assert (claimed.attempts, claimed.available_at, claimed.state) == (0, 1000.0, WorkState.CLAIMED)
    failed = await queue.fail("i", tenant="t", worker="w", error="boom")
    assert failed.attempts == 1
    assert failed.available_at is not None
    assert failed.available_at > 1000.0


async def test_tenants_at_one_turn_are_ordered_by_their_oldest_due_item_of_any_priority(
    any_redis: Any,
) -> None:
    # Both never served (turn 0): a's oldest item is its low-priority one, older than b's,
    # so a goes first and hands out its highest priority; a tenant alone at its turn needs
    # no such comparison (the claim stops at its first priority with a due item).
    clock = ManualClock(1000.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=namespace_for(any_redis))
    await queue.enqueue(WorkItem(id="a-low", tenant="a", queue="q", priority=WorkPriority.LOW))
    clock.advance(1)
    await queue.enqueue(WorkItem(id="b-normal", tenant="b", queue="q"))
    clock.advance(1)
    await queue.enqueue(
        WorkItem(id="a-urgent", tenant="a", queue="q", priority=WorkPriority.URGENT)
    )
    taken = [await _take(queue) for _ in range(3)]
    assert taken == [("a", "a-urgent"), ("b", "b-normal"), ("a", "a-low")]


async def test_a_waiting_tenant_whose_delayed_item_came_due_goes_by_that_item_not_a_later_one(
    any_redis: Any,
) -> None:
    # a's delayed item came due at 1005 and no claim has promoted it yet; a's new item (due
    # at 1010, after b's) is not a's oldest, so a goes by its 1005 item, ahead of b.
    clock = ManualClock(1000.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=namespace_for(any_redis))
    await queue.enqueue(WorkItem(id="a-delayed", tenant="a", queue="q", available_at=1005.0))
    clock.advance(10)
    await queue.enqueue(WorkItem(id="b0", tenant="b", queue="q"))
    await queue.enqueue(WorkItem(id="a-now", tenant="a", queue="q"))
    taken = [await _take(queue) for _ in range(3)]
    assert taken == [("a", "a-delayed"), ("b", "b0"), ("a", "a-now")]


async def test_an_item_later_than_its_tenants_head_reads_no_rotation_set(
    any_redis: Any,
) -> None:
    if "Cluster" in type(any_redis).__name__:
        pytest.skip("command counts are per node")
    clock = ManualClock(1000.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=namespace_for(any_redis))
    await queue.enqueue(WorkItem(id="i0", tenant="t", queue="q"))
    clock.advance(1)
    await any_redis.config_resetstat()
    await queue.enqueue(WorkItem(id="i1", tenant="t", queue="q"))
    calls = {
        name.removeprefix("cmdstat_"): int(stats["calls"])
        for name, stats in (await any_redis.info("commandstats")).items()
        if name
        not in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_info", "cmdstat_config|resetstat")
    }
    # The live check, the record, the ready entry, the depth, the tenant's head, and the
    # bell read and rung (it is short of its bound): nothing about rota, fresh or waiting.
    assert calls == {
        "hget": 1,
        "hset": 1,
        "zadd": 1,
        "hincrby": 1,
        "zscore": 1,
        "llen": 1,
        "lpush": 1,
    }


async def test_an_item_enqueued_with_attempts_and_failures_keeps_them(any_redis: Any) -> None:
    # As every backing does (the returned item is work.queued_copy's): the count and the
    # failures go on from there.
    clock = ManualClock(1000.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=namespace_for(any_redis))
    carried = WorkItem(id="i", tenant="t", queue="q", attempts=2, failures=("a:1", "b 💥"))
    queued = await queue.enqueue(carried)
    assert (queued.attempts, queued.failures, queued.state) == (
        2,
        ("a:1", "b 💥"),
        WorkState.QUEUED,
    )
    claimed = await queue.claim(worker="w", queue="q")
    assert claimed is not None
    assert (claimed.attempts, claimed.failures) == (2, ("a:1", "b 💥"))
    failed = await queue.fail("i", tenant="t", worker="w", error="c")
    assert (failed.attempts, failed.failures) == (3, ("a:1", "b 💥", "c"))
    # With a dedupe key and a delay too, the trailing arguments keep their places.
    delayed = WorkItem(
        id="j", tenant="t", queue="q", attempts=1, dedupe_key="k", available_at=2000.0
    )
    stored = await queue.enqueue(delayed)
    assert (stored.attempts, stored.dedupe_key, stored.available_at) == (1, "k", 2000.0)
    duplicate = await queue.enqueue(WorkItem(id="other", tenant="t", queue="q", dedupe_key="k"))
    assert (duplicate.id, duplicate.attempts, duplicate.available_at) == ("j", 1, 2000.0)


async def test_a_queue_written_before_the_rotation_sets_is_served_in_the_same_order(
    any_redis: Any,
) -> None:
    # The earlier layout kept every tenant with a queued item in one set scored by its turn
    # ('active', 0 = never served) and counted no depth. Rewritten into it, the queue keeps
    # its order, its turns and its depth.
    clock = ManualClock(1000.0)
    ns = namespace_for(any_redis)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=ns)
    for tenant, item_id in (("a", "a0"), ("b", "b0"), ("a", "a1"), ("b", "b1"), ("c", "c0")):
        await queue.enqueue(WorkItem(id=item_id, tenant=tenant, queue="q"))
        clock.advance(1)
    assert await _take(queue) == ("a", "a0")
    prefix = keys.queue_prefix(ns)
    q = keys.segment("q")
    turns = {"a": await any_redis.zscore(f"{prefix}rota:{q}", "a"), "b": 0, "c": 0}
    for kind in ("rota", "fresh", "fresh-of", "waiting", "heads"):
        await any_redis.delete(f"{prefix}{kind}:{q}")
    await any_redis.hdel(f"{prefix}stats:{q}", "depth")
    await any_redis.zadd(f"{prefix}active:{q}", turns)
    await queue.enqueue(WorkItem(id="d0", tenant="d", queue="q"))  # after the upgrade
    assert (await queue.stats(queue="q")).depth == 5
    taken = [await _take(queue) for _ in range(5)]
    assert taken == [("b", "b0"), ("c", "c0"), ("d", "d0"), ("a", "a1"), ("b", "b1")]
    assert await any_redis.exists(f"{prefix}active:{q}") == 0


async def test_a_claim_among_many_tied_tenants_reads_a_few_keys_not_every_tenant(
    any_redis: Any,
) -> None:
    if "Cluster" in type(any_redis).__name__:
        pytest.skip("command counts are per node")
    clock = ManualClock(1000.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=namespace_for(any_redis))
    for n in range(300):  # never served: all at turn 0, tied until their oldest items
        await queue.enqueue(WorkItem(id="i", tenant=f"t{n:03}", queue="q"))
    clock.advance(1)
    await any_redis.config_resetstat()
    claimed = await queue.claim(worker="w", queue="q")
    assert claimed is not None
    assert claimed.tenant == "t000"
    calls = sum(
        int(stats["calls"])
        for name, stats in (await any_redis.info("commandstats")).items()
        if name not in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_info")
    )
    assert calls < 40, {k: v["calls"] for k, v in (await any_redis.info("commandstats")).items()}
