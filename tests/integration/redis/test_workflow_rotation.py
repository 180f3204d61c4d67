"""Redis's workflow rotation: a hand-out costs no more at 10,000 tenants than at one, and
entries written before schedulers kept tenants (one set of every ready entry) still hand
out, in the default tenant's line, whichever script reaches them first."""

from __future__ import annotations

from typing import Any

import pytest

from durably.redis import RedisScheduler, keys
from durably.stores.workflows import Scheduler
from tests.handout_cost import check_handout_ratio
from tests.redis_service import namespace_for
from tests.written_before import check_written_before

pytestmark = pytest.mark.redis


async def test_a_hand_out_at_ten_thousand_tenants_costs_at_most_twice_one_tenant(
    redis_client: Any,
) -> None:
    ns = namespace_for(redis_client)

    async def make(namespace: str) -> Scheduler:
        return RedisScheduler(redis_client, namespace=namespace, key_prefix=ns)

    try:
        await check_handout_ratio(make)
    finally:
        async for key in redis_client.scan_iter(match=f"{ns}:*", count=1000):
            await redis_client.delete(key)


async def _write_as_before(client: Any, prefix: str) -> float:
    """Entries as a scheduler wrote them before tenants: every ready one (queued or in
    flight) in one set by visibility, sleeping ones apart. The server's time in us."""
    seconds, micros = await client.time()
    now = seconds * 1_000_000 + micros
    await client.zadd(
        prefix + "ready",
        {
            "queued-b": now - 2_000_000,
            "queued-a": now - 1_000_000,
            "lapsed": now - 5_000_000,
            "held": now + 300_000_000,
        },
    )
    await client.hset(prefix + "receipts", mapping={"lapsed": "1.old", "held": "2.live"})
    await client.hset(prefix + "taken", mapping={"lapsed": now - 35e6, "held": now})
    await client.zadd(prefix + "sleeping", {"asleep": 50.0})
    return float(now)


@pytest.mark.parametrize("first", ["next_ready", "cancel", "make_ready"])
async def test_entries_written_before_tenants_still_hand_out(redis_client: Any, first: str) -> None:
    ns = namespace_for(redis_client)
    scheduler = RedisScheduler(redis_client, key_prefix=ns)
    prefix = keys.scheduler_prefix(ns, scheduler.namespace)
    await _write_as_before(redis_client, prefix)
    if first == "cancel":
        await scheduler.cancel("queued-a")
    elif first == "make_ready":
        await scheduler.make_ready("fresh", tenant="other")
    expected = {
        "next_ready": ["lapsed", "queued-b", "queued-a"],
        "cancel": ["lapsed", "queued-b"],
        "make_ready": ["lapsed", "fresh", "queued-b", "queued-a"],
    }[first]
    await check_written_before(scheduler, expected)
    assert await redis_client.exists(prefix + "ready") == 0  # relaid out once
