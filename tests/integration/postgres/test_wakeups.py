"""LISTEN/NOTIFY: an idle worker starts new work within milliseconds, not at its next poll,
and keeps doing so after the listening connection is killed server-side; every store over
one pool listens on one connection, which UNLISTENs the channels of a closed store."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

import pytest
from pydantic import SecretStr

from durably.postgres import PostgresScheduler, PostgresStoreSettings, PostgresWorkQueue
from durably.postgres.changes import PostgresChanges
from durably.postgres.executor import database_for
from durably.postgres.notify import Listener
from durably.stores.changes import MISSED
from durably.stores.work import WorkItem
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres

SLOW_POLL = PostgresStoreSettings(dsn=SecretStr("unused"), poll_seconds=10.0)


async def kill(pool: Any, pid: int) -> None:
    async with database_for(pool).session(5.0) as session:
        await session.fetch("SELECT pg_terminate_backend($1)", pid)


async def reconnected(listener: Listener, old_pid: int) -> None:
    for _ in range(200):
        pid = listener.backend_pid
        if pid is not None and pid != old_pid:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the listener did not reconnect")


async def enqueue_later(queue: PostgresWorkQueue, item_id: str, delay: float) -> None:
    await asyncio.sleep(delay)
    await queue.enqueue(WorkItem(id=item_id, tenant="t"))


async def test_an_enqueue_wakes_an_idle_worker_long_before_its_poll(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, settings=SLOW_POLL, tables=tables))
    assert not await queue.wait_for_work(within=0)
    assert await queue.listener.ready()
    for attempt in range(2):
        started = time.perf_counter()
        producer = asyncio.create_task(enqueue_later(queue, f"i{attempt}", 0.1))
        assert await queue.wait_for_work(within=10.0)
        assert time.perf_counter() - started < 2.0
        await producer
        item = await queue.claim(worker="w")
        assert item is not None
        await queue.complete(item.id, tenant="t", worker="w")
        if attempt == 0:
            old = queue.listener.backend_pid
            assert old is not None
            await kill(pg_stores.pool, old)
            await reconnected(queue.listener, old)


async def test_a_make_ready_wakes_a_waiting_taker_also_after_the_listener_was_killed(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    scheduler = pg_stores.track(
        PostgresScheduler(pg_stores.pool, settings=SLOW_POLL, tables=tables)
    )
    assert await scheduler.next_ready(0) is None
    scheduler.listener.event("warm-up")
    assert await scheduler.listener.ready()
    for attempt in range(2):

        async def later(workflow: str) -> None:
            await asyncio.sleep(0.1)
            await scheduler.make_ready(workflow)

        started = time.perf_counter()
        producer = asyncio.create_task(later(f"wf{attempt}"))
        delivery = await scheduler.next_ready(10.0)
        assert delivery is not None
        assert delivery.workflow == f"wf{attempt}"
        assert time.perf_counter() - started < 2.0
        await producer
        await scheduler.done(delivery)
        if attempt == 0:
            old = scheduler.listener.backend_pid
            assert old is not None
            await kill(pg_stores.pool, old)
            await reconnected(scheduler.listener, old)


async def test_waiting_without_work_returns_after_within(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, settings=SLOW_POLL, tables=tables))
    started = time.perf_counter()
    assert not await queue.wait_for_work(within=0.2)
    assert 0.15 < time.perf_counter() - started < 2.0


async def test_an_enqueue_written_while_other_work_was_due_still_wakes_a_worker_that_drained_it(
    pg_stores: Stores,
) -> None:
    # Why every enqueue notifies, even one written while another item was due: the worker
    # can take that item and drain the queue before this enqueue commits, then go idle.
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, settings=SLOW_POLL, tables=tables))
    assert not await queue.wait_for_work(within=0)
    assert await queue.listener.ready()
    await queue.enqueue(WorkItem(id="due", tenant="t"))
    async with database_for(pg_stores.pool).session(5.0) as session, session.transaction():
        await queue.bound(session.connection).enqueue(  # type: ignore[attr-defined]
            WorkItem(id="later", tenant="t")
        )
        item = await queue.claim(worker="w")
        assert item is not None
        assert item.id == "due"
        await queue.complete(item.id, tenant="t", worker="w")
        assert await queue.claim(worker="w") is None
        waiting = asyncio.create_task(queue.wait_for_work(within=10.0))
        await asyncio.sleep(0.1)
        assert not waiting.done()  # idle: nothing due that it can see
        started = time.perf_counter()
    assert await waiting
    assert time.perf_counter() - started < 2.0
    item = await queue.claim(worker="w")
    assert item is not None
    assert item.id == "later"


@pytest.mark.parametrize("pg_driver", ["asyncpg"])
async def test_a_listener_whose_connection_asyncpg_already_released_reports_no_pid(
    pg_stores: Stores,
) -> None:
    # asyncpg hands a pooled connection back to its pool the moment it sees the server
    # close it, before the listener's own loop notices; asking for the pid in that window
    # used to raise InterfaceError.
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, settings=SLOW_POLL, tables=tables))
    assert await queue.listener.ready()
    assert queue.listener.backend_pid is not None
    with warnings.catch_warnings():
        # asyncpg warns that the connection still has a listener: it has, as on a close.
        warnings.simplefilter("ignore")
        await pg_stores.pool.release(queue.listener.shared.connection)  # what asyncpg does on close
    assert queue.listener.backend_pid is None


async def backends(pool: Any, pid: int) -> int:
    """How many server processes ``pid`` names (1 while its connection is open)."""
    async with database_for(pool).session(5.0) as session:
        rows = await session.fetch("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid)
    return int(rows[0][0])


async def test_every_store_over_one_pool_listens_on_one_connection_until_the_last_closes(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = PostgresWorkQueue(pg_stores.pool, settings=SLOW_POLL, tables=tables)
    kinds = [
        PostgresScheduler(pg_stores.pool, namespace=kind, settings=SLOW_POLL, tables=tables)
        for kind in ("a", "b")
    ]
    feed = PostgresChanges(database_for(pg_stores.pool), tables.channel("changes"))
    feed.start(lambda _workflow, _what: None)
    listeners = [queue.listener, *(kind.listener for kind in kinds), feed.listener]
    for listener in listeners:
        assert await listener.ready()
    pids = {listener.backend_pid for listener in listeners}
    assert len(pids) == 1
    pid = pids.pop()
    assert pid is not None
    assert await backends(pg_stores.pool, pid) == 1
    shared = feed.listener.shared
    assert shared is not None
    assert all(listener.shared is shared for listener in listeners)
    work, workflow, changes = (tables.channel(name) for name in ("work", "workflow", "changes"))
    assert await shared.server_channels() == sorted([work, workflow, changes])

    await queue.close()  # its channel goes; the others stay on the same connection
    assert await shared.server_channels() == sorted([workflow, changes])
    await kinds[0].close()  # the other kind still wants the workflow channel
    assert await shared.server_channels() == sorted([workflow, changes])
    await kinds[1].close()
    assert await shared.server_channels() == [changes]
    assert feed.listener.backend_pid == pid

    await feed.stop()  # the last listener: the connection closes
    assert shared.listeners == 0
    assert shared.connection is None
    if pg_stores.driver == "psycopg":  # asyncpg's goes back to its pool, still open
        for _ in range(100):
            if await backends(pg_stores.pool, pid) == 0:
                break
            await asyncio.sleep(0.02)
        assert await backends(pg_stores.pool, pid) == 0


async def test_a_killed_shared_connection_is_reopened_for_a_waiter_a_taker_and_the_feed(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, settings=SLOW_POLL, tables=tables))
    scheduler = pg_stores.track(
        PostgresScheduler(pg_stores.pool, settings=SLOW_POLL, tables=tables)
    )
    feed = PostgresChanges(database_for(pg_stores.pool), tables.channel("changes"))
    announced: list[str] = []
    feed.start(lambda _workflow, what: announced.append(what))
    try:
        await kill_and_recover(queue, scheduler, feed, announced, pg_stores.pool)
    finally:
        await feed.stop()


async def kill_and_recover(
    queue: PostgresWorkQueue,
    scheduler: PostgresScheduler,
    feed: PostgresChanges,
    announced: list[str],
    pool: Any,
) -> None:
    for listener in (queue.listener, scheduler.listener, feed.listener):
        assert await listener.ready()
    old = queue.listener.backend_pid
    assert old is not None
    announced.clear()
    await kill(pool, old)
    for listener in (queue.listener, scheduler.listener, feed.listener):
        await reconnected(listener, old)
    assert len({queue.listener.backend_pid, scheduler.listener.backend_pid}) == 1
    assert announced.count(MISSED) >= 2  # the loss and the reconnect, each told to the feed
    assert feed.live
    shared = feed.listener.shared
    assert shared is not None
    assert len(await shared.server_channels()) == 3  # every channel LISTENed again

    started = time.perf_counter()
    producer = asyncio.create_task(enqueue_later(queue, "after-kill", 0.1))
    assert await queue.wait_for_work(within=10.0)
    await producer

    async def ready_later() -> None:
        await asyncio.sleep(0.1)
        await scheduler.make_ready("wf-after-kill")

    maker = asyncio.create_task(ready_later())
    delivery = await scheduler.next_ready(10.0)
    await maker
    assert delivery is not None
    assert delivery.workflow == "wf-after-kill"
    # Both woke by NOTIFY on the new connection, long before their 10 s poll.
    assert time.perf_counter() - started < 4.0


async def test_notifications_sent_while_the_channels_change_each_still_wake_the_waiter(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, settings=SLOW_POLL, tables=tables))
    assert await queue.listener.ready()
    work = tables.channel("work")
    for n in range(10):
        event = await queue.listener.armed(work, 1.0)
        # Another store joins (LISTEN on the live connection) and leaves (UNLISTEN) around
        # the enqueue, stopping the connection's wait each time.
        scheduler = PostgresScheduler(
            pg_stores.pool, namespace=f"k{n}", settings=SLOW_POLL, tables=tables
        )
        scheduler.listener.start()
        await queue.enqueue(WorkItem(id=f"i{n}", tenant="t"))
        await scheduler.close()
        assert await Listener.wait(event, 5.0), f"enqueue {n} woke nobody"
