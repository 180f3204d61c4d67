"""A Redis store whose runs were written before the run totals existed: the first totals
read adds them, each once, and the scripts keep the totals from then on."""

from __future__ import annotations

from typing import Any

from durably import ManualClock
from durably.redis import RedisStateStore, keys
from durably.testing.state.totals import added_up, counted_after, stored_before
from tests.redis_service import namespace_for


async def test_runs_written_before_the_totals_are_counted_once_by_the_first_read(
    any_redis: Any,
) -> None:
    ns = namespace_for(any_redis)
    before = RedisStateStore(any_redis, clock=ManualClock(), key_prefix=ns)
    await stored_before(before)
    await before.tenant_totals()
    # As a store written before the totals looks: no totals, no run counted, no mark.
    for tenant, run_id in (("a", "r1"), ("a", "r2"), ("b", "r1")):
        await any_redis.hdel(keys.run_meta_key(ns, tenant, run_id), "totalled")
    for tenant in ("a", "b"):
        await any_redis.delete(keys.state_prefix(ns, tenant) + "totals")
    await any_redis.delete(keys.state_totals_counted_key(ns))

    after = RedisStateStore(any_redis, clock=ManualClock(), key_prefix=ns)
    await counted_after(after)
    # A second walk (another process before the mark) counts nothing again.
    await any_redis.delete(keys.state_totals_counted_key(ns))
    again = RedisStateStore(any_redis, clock=ManualClock(), key_prefix=ns)
    assert await again.tenant_totals(["a", "b"]) == [
        await added_up(again, "a"),
        await added_up(again, "b"),
    ]
