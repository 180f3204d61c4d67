"""Smoke tests of the Redis state store on standalone and cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durably import ManualClock, RunRecord, RunState, StateKey, Usage
from durably.errors import StateConflictError
from durably.redis.state import RedisStateStore
from durably.stores import StateDelta, StateQuery
from tests.redis_service import namespace_for


async def test_runs_round_trip_patch_and_list(any_redis: Any) -> None:
    store = RedisStateStore(any_redis, clock=ManualClock(), key_prefix=namespace_for(any_redis))
    tenant = "a:b{}é"
    runs = [
        await store.put_run(RunRecord(run_id=f"r{i}", tenant=tenant, agent_name="x"))
        for i in range(7)
    ]
    assert runs[0].version == 1
    patched = await asyncio.gather(
        *[
            store.patch_run(runs[0].key, StateDelta(usage=Usage(input_tokens=2), iterations=1))
            for _ in range(10)
        ]
    )
    assert max(p.version for p in patched) == 11
    got = await store.get_run(runs[0].key)
    assert got is not None
    assert got.usage.input_tokens == 20
    with pytest.raises(StateConflictError):
        await store.put_run(runs[0])
    await store.put_run(got.model_copy(update={"state": RunState.COMPLETED}))
    page = await store.list_runs(StateQuery(tenant=tenant, limit=3))
    seen = [r.run_id for r in page.records]
    while page.cursor:
        page = await store.list_runs(StateQuery(tenant=tenant, limit=3, cursor=page.cursor))
        seen += [r.run_id for r in page.records]
    assert seen == [f"r{i}" for i in range(7)]
    done = await store.list_runs(StateQuery(tenant=tenant, state=RunState.COMPLETED))
    assert [r.run_id for r in done.records] == ["r0"]
    assert await store.get_run(StateKey(tenant="a", id="r0")) is None


async def test_tenants_come_from_the_kept_set_and_runs_written_before_it_are_found_once(
    any_redis: Any,
) -> None:
    ns = namespace_for(any_redis)
    store = RedisStateStore(any_redis, clock=ManualClock(), key_prefix=ns)
    for tenant in ("b", "a", "c", "d"):
        await store.put_run(RunRecord(run_id="r", tenant=tenant, agent_name="x"))
    # A store written before the set was kept: the first listing scans once and fills it.
    await any_redis.delete(f"{ns}:state-tenants", f"{ns}:state-tenants-filled")
    assert await store.tenants() == ["a", "b", "c", "d"]
    assert await any_redis.zcard(f"{ns}:state-tenants") == 4
    # From then on the set answers: a name in it with no run is passed over, a page at a
    # time, and one the scan alone would find is not listed.
    await store.delete_run(StateKey(tenant="b", id="r"))
    await any_redis.zrem(f"{ns}:state-tenants", "d")
    assert await store.tenants(limit=1) == ["a"]
    assert await store.tenants(after="a", limit=1) == ["c"]
    assert await store.tenants() == ["a", "c"]
