"""A Redis dead-letter purge walks its set window by window: dead letters landing and
leaving meanwhile (other queues' of the tenant, the purged queue's own) never make it pass
over one that was there when it started, and each is purged or kept whole."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durably import ManualClock, WorkItem
from durably.redis import RedisWorkQueue, keys
from durably.redis import queue as redis_queue
from tests.redis_service import namespace_for

pytestmark = pytest.mark.redis

# Dead letters before the purge: the purged tenant's of the purged queue, the same
# tenant's of another queue (its set mixes both), another tenant's of the purged queue;
# and the purged tenant's items of the purged queue that fail while the purge runs.
BEFORE, OTHER_QUEUE, OTHER_TENANT, LANDING = 24, 24, 8, 12


def _layout() -> list[tuple[str, str, str]]:
    """(id, tenant, queue) in enqueue order, the kinds interleaved so every window of the
    purge's walk mixes them."""
    rows: list[tuple[str, str, str]] = []
    for n in range(max(BEFORE, OTHER_QUEUE, LANDING)):
        if n < OTHER_QUEUE:
            rows.append((f"other-{n:02d}", "acme", "other"))
        if n < LANDING:
            rows.append((f"landing-{n:02d}", "acme", "jobs"))
        if n < BEFORE:
            rows.append((f"before-{n:02d}", "acme", "jobs"))
        if n < OTHER_TENANT:
            rows.append((f"beta-{n:02d}", "beta", "jobs"))
    return rows


async def _enqueued(queue: RedisWorkQueue, clock: ManualClock) -> list[WorkItem]:
    """Every item of the layout enqueued (its id its dedupe key, kept a while after it
    finishes) and claimed; all but the landing ones dead-lettered. The claimed items."""
    for item_id, tenant, name in _layout():
        fresh = WorkItem(id=item_id, tenant=tenant, queue=name, dedupe_key=item_id)
        await queue.enqueue(fresh, dedupe_ttl=3600)
        clock.advance(0.001)
    claimed: list[WorkItem] = []
    for name in ("jobs", "other"):
        while (taken := await queue.claim(worker="w", queue=name)) is not None:
            claimed.append(taken)
    for item in claimed:
        if not item.id.startswith("landing"):
            await queue.fail(item.id, tenant=item.tenant, worker="w", error="x", retryable=False)
    return claimed


async def _states(client: Any, ns: str) -> dict[str, str]:
    """Each item of the layout: 'gone' (no trace), 'dead' (its hash, its place in both
    dead-letter sets and its dedupe key), or 'half' (anything between)."""
    prefix = keys.queue_prefix(ns)
    states: dict[str, str] = {}
    for item_id, tenant, name in _layout():
        ref = keys.item_ref(tenant, item_id)
        dedupe = keys.segment(tenant) + keys.segment(name) + keys.segment(item_id)
        traces = [
            bool(await client.exists(keys.item_key(ns, tenant, item_id))),
            await client.zscore(f"{prefix}dead:{keys.segment(name)}", ref) is not None,
            await client.zscore(f"{prefix}dead-tenant:{keys.segment(tenant)}", ref) is not None,
            bool(await client.hexists(f"{prefix}dedupe", dedupe)),
        ]
        states[item_id] = "gone" if not any(traces) else "dead" if all(traces) else "half"
    return states


@pytest.mark.parametrize("whose", ["tenant", "every tenant"])
async def test_a_purge_takes_every_dead_letter_there_before_it_while_others_land_and_leave(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch, whose: str
) -> None:
    monkeypatch.setattr(redis_queue, "DEAD_PURGE_BATCH", 4)
    ns = namespace_for(any_redis)
    clock = ManualClock(1000.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=ns)
    elsewhere = RedisWorkQueue(any_redis, clock=clock, key_prefix=ns)  # another process
    claimed = await _enqueued(queue, clock)
    held = sorted(i.id for i in claimed if i.id.startswith("landing"))
    # Between the purge's windows (its own script calls), another process purges two of
    # the tenant's other queue's dead letters, the oldest (behind the walk: a walk by rank
    # would skip as many of its own), and every other window dead-letters a held item.
    call = queue._call
    taken_out: list[str] = []
    windows = 0

    async def meanwhile(name: str, *args: Any) -> Any:
        nonlocal windows
        answer = await call(name, *args)
        if name == "queue_purge_dead":
            if windows % 2 == 0 and windows // 2 < len(held):
                landing = held[windows // 2]
                await elsewhere.fail(landing, tenant="acme", worker="w", error="x", retryable=False)
            for n in range(len(taken_out), min(len(taken_out) + 2, OTHER_QUEUE)):
                taken_out.append(f"other-{n:02d}")
                await elsewhere.purge_dead_letters(
                    queue="other", tenant="acme", item_id=taken_out[-1]
                )
            windows += 1
        return answer

    monkeypatch.setattr(queue, "_call", meanwhile)
    tenant = "acme" if whose == "tenant" else None
    deleted = await queue.purge_dead_letters(queue="jobs", tenant=tenant)
    monkeypatch.setattr(queue, "_call", call)
    # Whatever the walk left behind of the held items now lands too.
    for landing in held[(windows + 1) // 2 :]:
        await elsewhere.fail(landing, tenant="acme", worker="w", error="x", retryable=False)

    assert windows >= 6, "the walk took too few windows to interleave"
    states = await _states(any_redis, ns)
    assert [i for i, s in states.items() if s == "half"] == []
    assert [i for i, s in states.items() if i.startswith("before") and s != "gone"] == []
    landed_gone = [i for i, s in states.items() if i.startswith("landing") and s == "gone"]
    beta_gone = [i for i, s in states.items() if i.startswith("beta") and s == "gone"]
    assert len(beta_gone) == (0 if tenant else OTHER_TENANT)
    assert deleted == BEFORE + len(landed_gone) + len(beta_gone)
    kept_other = [i for i, s in states.items() if i.startswith("other") and s == "dead"]
    assert sorted(kept_other) == sorted(
        f"other-{n:02d}" for n in range(OTHER_QUEUE) if f"other-{n:02d}" not in taken_out
    )
    listed = await queue.dead_letters(tenant="acme", queue="jobs", limit=100)
    assert sorted(i.id for i in listed) == sorted(
        i for i, s in states.items() if i.startswith("landing") and s == "dead"
    )


async def test_a_purge_beside_concurrent_failures_leaves_each_dead_letter_whole(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_queue, "DEAD_PURGE_BATCH", 3)
    ns = namespace_for(any_redis)
    clock = ManualClock(1000.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=ns)
    failing = RedisWorkQueue(any_redis, clock=clock, key_prefix=ns)
    claimed = await _enqueued(queue, clock)

    async def land() -> None:
        for item in claimed:
            if item.id.startswith("landing"):
                await failing.fail(item.id, tenant="acme", worker="w", error="x", retryable=False)

    async def purge() -> int:
        return await queue.purge_dead_letters(queue="jobs", tenant="acme")

    deleted, _ = await asyncio.gather(purge(), land())
    states = await _states(any_redis, ns)
    assert [i for i, s in states.items() if s == "half"] == []
    assert [i for i, s in states.items() if i.startswith("before") and s != "gone"] == []
    assert all(s == "dead" for i, s in states.items() if i.startswith(("other", "beta")))
    landed_gone = [i for i, s in states.items() if i.startswith("landing") and s == "gone"]
    assert deleted == BEFORE + len(landed_gone)
