"""Redis dead-letter listings, a page a script: page after page gives what one read would,
in enqueue order, also when enqueue orders tie (two producers in one microsecond)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from durably import ManualClock, WorkItem
from durably.redis import RedisWorkQueue
from durably.redis import queue as redis_queue
from tests.redis_service import namespace_for

pytestmark = pytest.mark.redis

# (id, tenant, queue), in the order they are dead-lettered
LAYOUT = [
    ("a", "t1", "q1"),
    ("b", "t2", "q2"),
    ("c", "t1", "q2"),
    ("d", "t1", "q1"),
    ("e", "t2", "q1"),
    ("f", "t1", "q1"),
    ("g", "t1", "q2"),
]


@pytest.mark.parametrize("tied", [False, True], ids=["ordered", "tied"])
async def test_dead_letters_read_a_page_at_a_time_list_every_one_in_order(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch, tied: bool
) -> None:
    monkeypatch.setattr(redis_queue, "_DEAD_LETTER_PAGE", 2)
    if tied:  # every item the same enqueue order: the item refs alone order them
        monkeypatch.setattr(redis_queue, "ready_member", lambda now, item_id: f"{7:016d}{item_id}")
    queue = RedisWorkQueue(
        any_redis, clock=ManualClock(1000.0), key_prefix=namespace_for(any_redis)
    )
    for item_id, tenant, name in LAYOUT:
        await queue.enqueue(WorkItem(id=item_id, tenant=tenant, queue=name))
        claimed = await queue.claim(worker="w", queue=name)
        assert claimed is not None
        assert claimed.id == item_id
        await queue.fail(item_id, tenant=tenant, worker="w", error="boom", retryable=False)
    # A tie falls to the item's ref, which begins with its tenant, then its id.
    expected = sorted(LAYOUT, key=lambda e: (e[1], e[0])) if tied else LAYOUT
    tenants: list[str | None] = [None, "t1", "t2"]
    queues: list[str | None] = [None, "q1", "q2"]
    for of_tenant, of_queue, limit in itertools.product(tenants, queues, [1, 2, 3, 50]):
        listed = await queue.dead_letters(tenant=of_tenant, queue=of_queue, limit=limit)
        wanted = [i for i, t, q in expected if of_tenant in (None, t) and of_queue in (None, q)][
            :limit
        ]
        assert [item.id for item in listed] == wanted, (of_tenant, of_queue, limit)
        assert all(item.failures == ("boom",) for item in listed)


async def test_a_tenants_dead_letters_of_one_queue_are_found_a_bounded_page_per_script(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One tenant's dead letters of every queue share a set: finding the one of a rare queue
    # behind many of another looks at a page of them per script, never all in one.
    monkeypatch.setattr(redis_queue, "_DEAD_LETTER_PAGE", 2)
    script = redis_queue._LUA["queue_dead_letters"]
    calls: list[int] = []
    run = script.run

    async def counted(*args: Any) -> Any:
        calls.append(1)
        return await run(*args)

    monkeypatch.setattr(script, "run", counted)
    queue = RedisWorkQueue(
        any_redis, clock=ManualClock(1000.0), key_prefix=namespace_for(any_redis)
    )
    for n in range(7):
        name = "rare" if n == 6 else "busy"
        await queue.enqueue(WorkItem(id=f"i{n}", tenant="t", queue=name))
        assert await queue.claim(worker="w", queue=name) is not None
        await queue.fail(f"i{n}", tenant="t", worker="w", error="boom", retryable=False)
    listed = await queue.dead_letters(tenant="t", queue="rare")
    assert [item.id for item in listed] == ["i6"]
    assert len(calls) == 4  # refs i0-i1, i2-i3, i4-i5, then i6 and the set's end
