"""The cluster client a ``redis+cluster://`` DSN opens waits for a free turn, as one
server's pool does: twenty concurrent writes through two turns all land, and a call that
finds every turn held past ``pool_timeout`` gets `PoolExhaustedError`."""

from __future__ import annotations

import asyncio
import time

import pytest

from durably import ManualClock, RunRecord, StateKey
from durably.errors import PoolExhaustedError
from durably.redis import RedisStateStore
from durably.redis.cluster import WaitingCluster
from durably.stores import open_stores
from tests.redis_service import cluster_servers, drop_namespaces, unique_namespace

pytestmark = pytest.mark.redis


def _dsn(**options: str) -> str:
    nodes = ",".join(f"127.0.0.1:{n.port}" for n in cluster_servers())
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"redis+cluster://{nodes}/?{query}"


async def test_twenty_writes_through_two_turns_of_a_cluster_client_all_land() -> None:
    stores = await open_stores(_dsn(pool_size="2", durable="false"))
    client = stores.database
    assert isinstance(client, WaitingCluster)
    ns = unique_namespace()
    try:
        store = RedisStateStore(client, clock=ManualClock(), key_prefix=ns)
        runs = [RunRecord(run_id=f"run-{n}", tenant=f"t{n % 7}", agent_name="a") for n in range(20)]
        stored = await asyncio.gather(*(store.put_run(run) for run in runs))
        assert sorted(r.run_id for r in stored) == sorted(r.run_id for r in runs)
        for node in client.get_nodes():  # no node ever needed more than the two turns
            assert len(node._connections) <= 2
    finally:
        await drop_namespaces(client, [ns])
        await stores.close()


async def test_a_call_finding_every_turn_held_waits_then_is_refused() -> None:
    stores = await open_stores(_dsn(pool_size="1", pool_timeout="0.5", durable="false"))
    client = stores.database
    assert isinstance(client, WaitingCluster)
    store = RedisStateStore(client, clock=ManualClock(), key_prefix=unique_namespace())
    try:
        holding = asyncio.Event()
        release = asyncio.Event()

        async def hold() -> None:
            async with client.admitted():
                holding.set()
                await release.wait()

        holder = asyncio.create_task(hold())
        await holding.wait()
        started = time.monotonic()
        with pytest.raises(PoolExhaustedError):
            await store.get_run(StateKey(tenant="t", id="missing"))
        assert time.monotonic() - started >= 0.45  # it waited for a turn first
        release.set()
        await holder
        assert await store.get_run(StateKey(tenant="t", id="missing")) is None  # the turn is back
    finally:
        await stores.close()
