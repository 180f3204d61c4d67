"""Waiting for replicas (``RedisStoreSettings.replicas``): a real primary and replica the
test starts. An acknowledged write is on the replica; with the replica gone, a write raises
`ReplicationTimeoutError` once the timeout has passed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError
from redis.asyncio import Redis

from durably import ManualClock, RunRecord, StateKey, WorkItem
from durably.errors import ReplicationTimeoutError
from durably.redis import RedisStateStore, RedisStoreSettings, RedisWorkQueue
from tests.redis_service import RedisServer, start_server, unique_namespace

pytestmark = pytest.mark.redis


@dataclass
class Pair:
    primary: RedisServer
    replica: RedisServer
    settings: RedisStoreSettings
    client: Any
    replica_client: Any


async def _linked(primary: Any) -> None:
    """Until the primary counts its replica as connected and in sync."""
    async with asyncio.timeout(30):
        while True:
            info = await primary.info("replication")
            if info.get("connected_slaves") == 1 and "online" in str(info.get("slave0", "")):
                return
            await asyncio.sleep(0.05)


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    primary = start_server("--appendonly", "yes", "--repl-diskless-sync-delay", "0")
    replica = start_server("--replicaof", "127.0.0.1", str(primary.port))
    settings = RedisStoreSettings(
        dsn=SecretStr(primary.url),
        key_prefix=unique_namespace(),
        replicas=1,
        replica_timeout_seconds=10.0,  # generous: the machine is shared
        max_attempts=1,
    )
    client = settings.client()
    replica_client = Redis(host="127.0.0.1", port=replica.port)
    await _linked(client)
    yield Pair(primary, replica, settings, client, replica_client)
    await client.aclose()
    await replica_client.aclose()
    replica.kill()
    primary.kill()


async def test_an_acknowledged_write_is_already_on_the_replica(pair: Pair) -> None:
    clock = ManualClock()
    state = RedisStateStore(pair.client, clock=clock, settings=pair.settings)
    queue = RedisWorkQueue(pair.client, clock=clock, settings=pair.settings)
    replica_settings = pair.settings.model_copy(update={"replicas": 0})
    on_replica = RedisStateStore(pair.replica_client, clock=clock, settings=replica_settings)
    replica_queue = RedisWorkQueue(pair.replica_client, clock=clock, settings=replica_settings)
    for n in range(20):
        await state.put_run(RunRecord(run_id=f"r{n}", tenant="t", agent_name="a"))
        assert await on_replica.get_run(StateKey(tenant="t", id=f"r{n}")) is not None
        await queue.enqueue(WorkItem(id=f"i{n}", tenant="t"))
        assert (await replica_queue.stats()).depth == n + 1
    assert (await queue.stats()).depth == 20  # reads wait for nothing


async def test_a_write_no_replica_acknowledges_raises_after_the_timeout(pair: Pair) -> None:
    await RedisWorkQueue(pair.client, settings=pair.settings).enqueue(
        WorkItem(id="before", tenant="t")
    )
    short = pair.settings.model_copy(update={"replica_timeout_seconds": 0.5})
    queue = RedisWorkQueue(pair.client, clock=ManualClock(), settings=short)
    pair.replica.kill()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ReplicationTimeoutError) as raised:
        await queue.enqueue(WorkItem(id="unreplicated", tenant="t"))
    assert loop.time() - started >= 0.45
    assert (raised.value.wanted, raised.value.acknowledged) == (1, 0)
    assert raised.value.retryable
    assert (await queue.stats()).depth == 2  # on the primary: a read waits for nothing


def test_waiting_for_replicas_is_refused_with_a_cluster_client() -> None:
    with pytest.raises(ValidationError, match="standalone"):
        RedisStoreSettings(dsn=SecretStr("redis://127.0.0.1:1/0"), cluster=True, replicas=1)
