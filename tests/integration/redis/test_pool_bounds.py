"""An App on Redis holds no more connections than its pool (its one pub/sub connection is
one of them), counted by the server (``CLIENT LIST``), through a 20,000-step fan-out with
500 handles waiting, every kind of waiter idle at once, and a server that pauses every
write for seconds; every step runs once (counted by the steps)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from durably import App, Context
from durably.errors import PoolExhaustedError
from durably.stores.dsn import DEFAULT_POOL_SIZE
from tests.connection_peak import Peak
from tests.fan_out import Batches, every_waiter_at_once, fan_out_beside_waiters
from tests.redis_service import start_server
from tests.serving import served

pytestmark = pytest.mark.redis

POOL = DEFAULT_POOL_SIZE["redis"]
WIDE = 20_000
WAITERS = 500
PAUSED_MS = 3000


class Connections:
    """A DSN on a server of this test's own whose connections carry a client name, and the
    server's count of them."""

    def __init__(self, url: str, admin: Redis) -> None:
        self.name = f"durably-pools-{uuid.uuid4().hex[:8]}"
        self.dsn = f"{url}?client_name={self.name}"
        self.admin = admin

    async def count(self) -> int:
        clients = await self.admin.client_list()
        return sum(1 for client in clients if client.get("name") == self.name)


@pytest.fixture
async def connections() -> AsyncIterator[Connections]:
    server = start_server("--appendonly", "yes", "--appendfsync", "everysec")
    admin = Redis(host="127.0.0.1", port=server.port, decode_responses=True)
    try:
        yield Connections(server.url, admin)
    finally:
        await admin.aclose()
        server.kill()


async def test_twenty_thousand_gathered_steps_and_five_hundred_waiters_stay_within_the_pool(
    connections: Connections,
) -> None:
    app = App(connections.dsn)  # the default pool
    try:
        async with Peak(connections.count) as peak:
            await fan_out_beside_waiters(app, wide=WIDE, waiters=WAITERS)
    finally:
        await app.close()
    # Every connection is the pool's: a served kind waits for work on one of them.
    assert 3 <= peak.most <= POOL, peak.most
    assert peak.samples >= 10


async def test_a_waiter_a_task_consumer_and_two_served_kinds_stay_within_the_pool(
    connections: Connections,
) -> None:
    size = 8
    app = App(f"{connections.dsn}&pool_size={size}")
    subscribed: list[int] = []

    async def count_subscribers() -> None:
        clients = await connections.admin.client_list()
        mine = [client for client in clients if client.get("name") == connections.name]
        subscribed.append(sum(1 for client in mine if int(client.get("sub", 0)) > 0))

    try:
        async with Peak(connections.count) as peak:
            await every_waiter_at_once(app, count_subscribers)
    finally:
        await app.close()
    assert subscribed == [1]  # one pub/sub connection for the waiting handles
    # The subscription, each kind's and the queue's idle wait hold pooled connections.
    assert peak.most <= size, peak.most
    assert peak.samples >= 10


async def test_a_server_pausing_writes_for_seconds_stalls_the_pass_which_then_completes(
    connections: Connections,
) -> None:
    # A pool wait shorter than the pause: callers time out on the stalled pool meanwhile.
    app = App(f"{connections.dsn}&pool_timeout=0.5")
    work = Batches(app, 500)

    @app.workflow
    async def small(ctx: Context, n: int) -> int:
        return n

    try:
        async with Peak(connections.count) as peak, served(app):
            handle = await work.workflow.start()
            waiting = [asyncio.ensure_future(handle.result(timeout=120)) for _ in range(50)]
            await asyncio.wait_for(work.first.wait(), timeout=60)
            await connections.admin.client_pause(PAUSED_MS, all=False)  # writes only
            # More starts than the pool holds, each write held up by the pause.
            starts = asyncio.gather(
                *(small.start(n) for n in range(2 * POOL)), return_exceptions=True
            )
            await asyncio.sleep(PAUSED_MS / 1000 - 0.5)
            stalled = len(work.ran)
            started = await starts
            assert await asyncio.gather(*waiting) == [work.total] * 50
        assert (await handle.status()).attempts == 0  # the pass never failed
    finally:
        await app.close()
    assert stalled < 3 * work.size  # the pause held the pass back
    assert work.ran_each_once()
    refused = [e for e in started if isinstance(e, BaseException)]
    assert refused, "no caller waited out the pool during the pause"
    assert all(isinstance(e, PoolExhaustedError) for e in refused), refused
    assert peak.most <= POOL, peak.most
