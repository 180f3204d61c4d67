"""An App on PostgreSQL holds no more connections than its pool and its one listening
connection (shared by the served kinds, the task queue and the waiting handles), counted
by the server (``pg_stat_activity``), through fan-outs far wider than the pool, hundreds
of waiting handles, every kind of waiter idle at once, a records table locked for
seconds, and a pool whose every connection is taken; and every step runs once (counted by
the steps).

The fan-out is 20,000 steps wide (``DURABLY_FAN_OUT`` sets it)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from durably import App, Context
from durably.errors import PoolExhaustedError
from durably.stores.dsn import DEFAULT_POOL_SIZE
from tests.connection_peak import Peak
from tests.fan_out import Batches, every_waiter_at_once, fan_out_beside_waiters
from tests.pg_service import create_database
from tests.serving import served

pytestmark = pytest.mark.postgres

POOL = DEFAULT_POOL_SIZE["postgresql"]
WIDE = int(os.environ.get("DURABLY_FAN_OUT", "20000"))
WAITERS = 500
LOCKED_SECONDS = 3.0


class Connections:
    """The DSN of a fresh database for one App, tagged with an application_name, and the
    server's count of that App's connections."""

    def __init__(self, dsn: str, admin: psycopg.AsyncConnection[tuple[int]]) -> None:
        self.name = f"durably-pools-{uuid.uuid4().hex[:8]}"
        self.dsn = f"{dsn}?application_name={self.name}"
        self._admin = admin

    async def count(self) -> int:
        cursor = await self._admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (self.name,)
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture
async def connections() -> AsyncIterator[Connections]:
    dsn = create_database()
    admin = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        yield Connections(dsn, admin)
    finally:
        await admin.close()


@pytest.mark.timeout(300)
async def test_twenty_thousand_gathered_steps_and_five_hundred_waiters_stay_within_the_pool(
    connections: Connections,
) -> None:
    app = App(connections.dsn)  # the default pool
    try:
        async with Peak(connections.count) as peak:
            await fan_out_beside_waiters(app, wide=WIDE, waiters=WAITERS)
    finally:
        await app.close()
    # The pool, and the one listening connection of both kinds served and the waiting
    # handles.
    assert 3 <= peak.most <= POOL + 1, peak.most
    assert peak.samples >= 10


async def test_a_waiter_a_task_consumer_and_two_served_kinds_share_one_listening_connection(
    connections: Connections,
) -> None:
    size = 3
    app = App(f"{connections.dsn}&pool_size={size}")
    beside: list[int] = []

    async def count_beside_the_pool() -> None:
        pool: Any = (await app.stores()).database
        for _ in range(50):  # a reading while the pool neither grew nor shrank
            opened = pool.get_stats()["pool_size"]
            counted = await connections.count()
            if pool.get_stats()["pool_size"] == opened:
                beside.append(counted - opened)
                return
            await asyncio.sleep(0.02)

    try:
        async with Peak(connections.count) as peak:
            await every_waiter_at_once(app, count_beside_the_pool)
    finally:
        await app.close()
    for _ in range(100):  # the server ends a closed connection's backend soon after
        if await connections.count() == 0:
            break
        await asyncio.sleep(0.02)
    assert await connections.count() == 0  # the listening connection closed with the App
    assert beside == [1]  # one listening connection outside the pool, for all of them
    assert peak.most <= size + 1, peak.most
    assert peak.samples >= 10


async def test_over_asyncpg_the_listening_connection_is_one_of_the_pool(
    connections: Connections,
) -> None:
    size = 3
    dsn = connections.dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
    app = App(f"{dsn}&pool_size={size}")
    counted: list[int] = []

    async def count() -> None:
        counted.append(await connections.count())

    try:
        async with Peak(connections.count) as peak:
            await every_waiter_at_once(app, count)
    finally:
        await app.close()
    assert counted[0] >= 1  # the server sees the App's connections under its name
    assert peak.most <= size, peak.most


async def test_a_records_table_locked_for_seconds_stalls_the_pass_which_then_completes(
    connections: Connections,
) -> None:
    # A pool wait shorter than the lock: callers time out on the stalled pool meanwhile.
    app = App(f"{connections.dsn}&pool_timeout=0.5")
    work = Batches(app, 200)
    locker = await psycopg.AsyncConnection.connect(connections.dsn.split("?")[0])
    try:
        async with Peak(connections.count) as peak, served(app):
            handle = await work.workflow.start()
            waiting = [asyncio.ensure_future(handle.result(timeout=120)) for _ in range(50)]
            await asyncio.wait_for(work.first.wait(), timeout=60)
            async with locker.transaction():
                await locker.execute(
                    "LOCK TABLE durably_workflow_checkpoint IN ACCESS EXCLUSIVE MODE"
                )
                # Fifty readers of the locked table: more than the pool holds.
                looks = asyncio.gather(
                    *(handle.status() for _ in range(50)), return_exceptions=True
                )
                await asyncio.sleep(LOCKED_SECONDS)  # the stall itself
                stalled = len(work.ran)
                assert not any(w.done() for w in waiting)
            looked = await looks
            assert await asyncio.gather(*waiting) == [work.total] * 50
        assert (await handle.status()).attempts == 0  # the pass never failed
    finally:
        await locker.close()
        await app.close()
    assert stalled < 3 * work.size  # the lock held the pass back
    assert work.ran_each_once()
    refused = [e for e in looked if isinstance(e, BaseException)]
    assert refused, "no caller waited out the pool during the stall"
    assert all(isinstance(e, PoolExhaustedError) for e in refused), refused
    # No caller that timed out opened a connection of its own beside the pool (and the
    # listening connection).
    assert peak.most <= POOL + 1, peak.most


async def test_a_record_write_that_finds_every_connection_taken_waits_for_one(
    connections: Connections,
) -> None:
    app = App(f"{connections.dsn}&pool_size=2&pool_timeout=0.2")
    ran: list[int] = []
    effect_ran = asyncio.Event()
    taken = asyncio.Event()

    @app.step
    async def pay(n: int) -> int:
        ran.append(n)
        effect_ran.set()
        await taken.wait()  # returns once the test holds every connection of the pool
        return n

    @app.workflow
    async def once(ctx: Context) -> int:
        return await pay(7)

    pool: Any = (await app.stores()).database
    try:
        async with served(app):
            handle = await once.start()
            await asyncio.wait_for(effect_ran.wait(), timeout=60)
            held = [await pool.getconn(), await pool.getconn()]
            refused_before = pool.get_stats().get("requests_errors", 0)
            taken.set()
            await asyncio.sleep(1.0)  # several pool timeouts pass while the write waits
            refused = pool.get_stats().get("requests_errors", 0) - refused_before
            for connection in held:
                await pool.putconn(connection)
            assert await handle.result(timeout=60) == 7
    finally:
        await app.close()
    assert refused >= 2  # the record write met the exhausted pool, more than once
    assert ran == [7]  # and its effect never ran again
