"""Redis connection pools: a busy pool makes a caller wait (up to ``pool_timeout_seconds``),
as PostgreSQL's does, and only then refuses with `PoolExhaustedError`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio
from pydantic import SecretStr
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from durably import ManualClock, RunRecord, WorkflowStatus
from durably.errors import PoolExhaustedError
from durably.redis import RedisCheckpointer, RedisStateStore, RedisStoreSettings
from tests.redis_service import (
    RedisServer,
    cluster_servers,
    connect,
    drop_namespaces,
    durable_server,
    unique_namespace,
)


@pytest_asyncio.fixture
async def namespace(redis_server: RedisServer) -> AsyncIterator[str]:
    ns = unique_namespace()
    yield ns
    cleaner = Redis(host="127.0.0.1", port=redis_server.port)
    await drop_namespaces(cleaner, [ns])
    await cleaner.aclose()


def settings_for(server: RedisServer, namespace: str, **fields: Any) -> RedisStoreSettings:
    return RedisStoreSettings(dsn=SecretStr(server.url), key_prefix=namespace, **fields)


def run(n: int) -> RunRecord:
    return RunRecord(run_id=f"run-{n}", tenant="acme", agent_name="agent")


async def test_twenty_concurrent_writes_through_a_pool_of_ten_all_land(
    redis_server: RedisServer, namespace: str
) -> None:
    settings = settings_for(redis_server, namespace, pool_size=10)
    client = settings.client()
    try:
        store = RedisStateStore(client, clock=ManualClock(), settings=settings)
        stored = await asyncio.gather(*(store.put_run(run(n)) for n in range(20)))
        assert sorted(r.run_id for r in stored) == sorted(f"run-{n}" for n in range(20))
        assert all(r.version == 1 for r in stored)
        assert client.connection_pool.max_connections == 10
    finally:
        await client.aclose()


async def test_a_call_finding_the_pool_busy_waits_up_to_the_pool_timeout(
    redis_server: RedisServer, namespace: str
) -> None:
    settings = settings_for(redis_server, namespace, pool_size=1, pool_timeout_seconds=2.0)
    client = settings.client()
    store = RedisStateStore(client, clock=ManualClock(), settings=settings)
    try:
        held = await client.connection_pool.get_connection()
        started = time.monotonic()
        with pytest.raises(PoolExhaustedError) as refused:
            await store.put_run(run(1))
        waited = time.monotonic() - started
        assert 1.9 <= waited < 10  # it waited for the pool, and was not retried after
        assert (refused.value.pool_size, refused.value.retryable) == (1, True)
        assert "size 1" in str(refused.value)
        # A connection given back within the timeout goes to the call waiting for it.
        waiting = asyncio.create_task(store.put_run(run(1)))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await client.connection_pool.release(held)
        assert (await asyncio.wait_for(waiting, timeout=10)).version == 1
    finally:
        await client.aclose()


async def test_a_store_built_without_settings_names_its_clients_pool_size(
    redis_server: RedisServer, namespace: str
) -> None:
    client: Any = Redis(host="127.0.0.1", port=redis_server.port, max_connections=1)
    store = RedisStateStore(client, clock=ManualClock(), key_prefix=namespace)
    held = await client.connection_pool.get_connection()
    try:
        with pytest.raises(PoolExhaustedError) as refused:
            await store.put_run(run(1))
        assert refused.value.pool_size == 1
        assert "None" not in str(refused.value)
    finally:
        await client.connection_pool.release(held)
        await client.aclose()


@pytest.mark.parametrize("mode", ["standalone", "cluster"])
async def test_listing_and_sweeping_five_hundred_workflows_fit_a_pool_of_two(mode: str) -> None:
    ns = unique_namespace()
    roomy = await connect(mode)
    small: Any
    if mode == "standalone":
        small = Redis(host="127.0.0.1", port=durable_server().port, max_connections=2)
    else:
        small = RedisCluster(host="127.0.0.1", port=cluster_servers()[0].port, max_connections=2)
        await small.initialize()
    try:
        writer = RedisCheckpointer(roomy, key_prefix=ns)
        names = [f"wf-{n:03}" for n in range(500)]
        for start in range(0, len(names), 50):
            await asyncio.gather(*(_complete(writer, name) for name in names[start : start + 50]))
        # A client whose pool refuses at once: nothing may take more than its two connections.
        reader = RedisCheckpointer(small, key_prefix=ns)
        listed = await reader.list_status(limit=1000)
        assert [i.workflow for i in listed] == names
        assert {i.status for i in listed} == {WorkflowStatus.COMPLETED}
        page = await reader.list_status(status=WorkflowStatus.COMPLETED, after="wf-249")
        assert [i.workflow for i in page] == names[250:300]
        later = datetime.now(UTC) + timedelta(hours=1)
        assert await reader.sweep(finished_before=later, limit=1000) == 500
        assert await reader.list_status() == []
    finally:
        await drop_namespaces(roomy, [ns])
        await roomy.aclose()
        await small.aclose()


async def _complete(checkpointer: RedisCheckpointer, workflow: str) -> None:
    holder = await checkpointer.claim(workflow, 30.0, 30.0)
    assert holder is not None
    await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
    await checkpointer.release(holder)
