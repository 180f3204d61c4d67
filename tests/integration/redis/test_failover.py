"""Riding out a server that goes away and comes back: a real `redis-server` the test starts,
kills and restarts on the same port (its AOF flushed on every write, so nothing is lost)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from durably import QueueStats, WorkItem
from durably.engine.worker import Worker
from durably.redis import RedisStoreSettings, RedisWorkQueue
from durably.stores import QueuePolicy
from tests.redis_service import RedisServer, start_server

pytestmark = pytest.mark.redis


@pytest.fixture
async def restartable() -> AsyncIterator[RedisServer]:
    server = start_server("--appendonly", "yes", "--appendfsync", "always")
    yield server
    server.kill()


async def _restart_after(server: RedisServer, seconds: float) -> None:
    await asyncio.sleep(seconds)  # the outage
    await asyncio.to_thread(server.start)


async def test_a_call_rides_out_a_server_restart_with_the_default_settings(
    restartable: RedisServer,
) -> None:
    settings = RedisStoreSettings(dsn=SecretStr(restartable.url))
    client = settings.client()
    queue = RedisWorkQueue(client, settings=settings)
    await queue.enqueue(WorkItem(id="before", tenant="t"))
    restartable.kill()
    restarting = asyncio.create_task(_restart_after(restartable, 2.0))
    try:
        enqueued = await queue.enqueue(WorkItem(id="during", tenant="t"))  # while it is down
        assert enqueued.id == "during"
        assert (await queue.stats()).depth == 2
    finally:
        await restarting
        await client.aclose()


async def test_the_worker_retries_a_failed_complete_until_it_lands_without_running_it_again(
    restartable: RedisServer,
) -> None:
    # The store gives up at its first failure: riding out the outage is the Worker's doing.
    settings = RedisStoreSettings(dsn=SecretStr(restartable.url), max_attempts=1)
    client = settings.client()
    queue = RedisWorkQueue(client, settings=settings, policy=QueuePolicy(lease_seconds=4))
    await queue.enqueue(WorkItem(id="job", tenant="t"))
    runs: list[str] = []
    restarting: list[asyncio.Task[None]] = []

    async def handler(item: WorkItem) -> None:
        runs.append(item.id)
        if len(runs) == 1:  # the server goes away between the handler's end and its complete
            restartable.kill()
            restarting.append(asyncio.create_task(_restart_after(restartable, 1.0)))

    worker = Worker(poll_seconds=0.05, maintenance_seconds=0.2)
    worker.handle(queue, handler)
    serving = asyncio.create_task(worker.run(install_signal_handlers=False))
    try:
        async with asyncio.timeout(30):
            while True:
                stats = await _stats(queue)
                if stats is not None and (stats.depth, stats.claimed) == (0, 0):
                    break
                await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await serving
        await asyncio.gather(*restarting)
        await client.aclose()
    assert runs == ["job"]


async def _stats(queue: RedisWorkQueue) -> QueueStats | None:
    try:
        return await queue.stats()
    except Exception:  # the server is down
        return None
