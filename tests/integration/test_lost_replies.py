"""A write whose answer is lost with the connection after the server applied it: the retry
must not report the caller's own state write as someone else's (a version conflict), nor
make a second work item of one enqueue. A real TCP proxy between the client and a real
server (Redis, PostgreSQL with either driver) drops that one answer; SQLite and memory
have no connection to lose."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from pydantic import SecretStr

from durably import ManualClock, RunRecord, SessionRecord, StateKey, WorkItem
from durably.errors import StateConflictError
from durably.postgres import (
    PostgresStateStore,
    PostgresStoreSettings,
    PostgresWorkQueue,
    StateTables,
    migrate,
)
from durably.redis import RedisStateStore, RedisStoreSettings, RedisWorkQueue
from durably.stores import WorkQueue
from durably.stores.runs import StateStore
from tests.pg_service import close_pool, open_pool, postgres_dsn
from tests.redis_service import durable_server, unique_namespace
from tests.reply_dropper import ReplyDropper

__all__ = ["postgres_dsn"]

MARKER = b"lost-reply"
BACKINGS = [
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("psycopg", marks=pytest.mark.postgres),
    pytest.param("asyncpg", marks=pytest.mark.postgres),
]


@dataclass
class Proxied:
    """A backing reached through the dropper: a Redis client or a PostgreSQL pool."""

    dropper: ReplyDropper
    redis: RedisStoreSettings | None = None
    client: Any = None
    postgres: PostgresStoreSettings | None = None
    pool: Any = None
    tables: StateTables | None = None

    def store(self, on_redis: Any, on_postgres: Any) -> Any:
        """``on_redis`` or ``on_postgres`` (a store class) over this backing."""
        if self.redis is not None:
            return on_redis(self.client, clock=ManualClock(), settings=self.redis)
        return on_postgres(
            self.pool, clock=ManualClock(), settings=self.postgres, tables=self.tables
        )

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        if self.pool is not None:
            await close_pool(self.pool)
        await self.dropper.stop()


@pytest.fixture(params=BACKINGS)
async def proxied(request: pytest.FixtureRequest) -> AsyncIterator[Proxied]:
    if request.param == "redis":
        dropper = ReplyDropper(durable_server().port, MARKER)
        url = f"redis://127.0.0.1:{await dropper.start()}/0"
        settings = RedisStoreSettings(
            dsn=SecretStr(url), key_prefix=unique_namespace(), max_attempts=5, backoff_seconds=0.01
        )
        backing = Proxied(dropper, redis=settings, client=settings.client())
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        parts = urlsplit(dsn)
        dropper = ReplyDropper(parts.port or 5432, MARKER)
        port = await dropper.start()
        proxied = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))
        pool = await open_pool(str(request.param), proxied, size=2)
        tables = StateTables(schema=f"t_{unique_namespace()}")
        await migrate(pool, tables)
        pg = PostgresStoreSettings(dsn=SecretStr(proxied), max_attempts=5, backoff_seconds=0.01)
        backing = Proxied(dropper, postgres=pg, pool=pool, tables=tables)
    yield backing
    await backing.close()


@pytest.fixture
async def dropping_store(proxied: Proxied) -> tuple[StateStore, ReplyDropper]:
    store: StateStore = proxied.store(RedisStateStore, PostgresStateStore)
    # Warm up first (scripts loaded, statements prepared): the request dropped must be the
    # write itself, applied by the server.
    await store.put_run(RunRecord(run_id="warm", tenant="t", agent_name="a"))
    await store.put_session(SessionRecord(session_id="warm", tenant="t"))
    return store, proxied.dropper


@pytest.fixture
async def dropping_queue(proxied: Proxied) -> tuple[WorkQueue, ReplyDropper]:
    queue: WorkQueue = proxied.store(RedisWorkQueue, PostgresWorkQueue)
    await queue.enqueue(WorkItem(id="warm", tenant="t"))
    warm = await queue.claim(worker="w")
    assert warm is not None
    await queue.complete(warm.id, tenant="t", worker="w")
    return queue, proxied.dropper


async def test_a_run_write_whose_answer_was_lost_is_not_reported_as_a_conflict(
    dropping_store: tuple[StateStore, ReplyDropper],
) -> None:
    store, dropper = dropping_store
    written = await store.put_run(RunRecord(run_id="lost-reply", tenant="t", agent_name="a"))
    assert dropper.dropped == 1
    stored = await store.get_run(StateKey(tenant="t", id="lost-reply"))
    assert stored is not None
    assert (written.version, stored.version, stored.agent_name) == (1, 1, "a")


async def test_a_session_write_whose_answer_was_lost_is_not_reported_as_a_conflict(
    dropping_store: tuple[StateStore, ReplyDropper],
) -> None:
    store, dropper = dropping_store
    written = await store.put_session(SessionRecord(session_id="lost-reply", tenant="t"))
    assert dropper.dropped == 1
    stored = await store.get_session(StateKey(tenant="t", id="lost-reply"))
    assert stored is not None
    assert (written.version, stored.version) == (1, 1)


async def test_another_writers_landed_write_is_still_a_conflict(
    dropping_store: tuple[StateStore, ReplyDropper],
) -> None:
    store, _ = dropping_store
    record = RunRecord(run_id="raced", tenant="t", agent_name="a")
    await store.put_run(record)
    with pytest.raises(StateConflictError):
        await store.put_run(record)  # the same record, the same instant: another write


async def test_an_enqueue_whose_answer_was_lost_makes_one_item_though_it_ran_meanwhile(
    dropping_queue: tuple[WorkQueue, ReplyDropper],
) -> None:
    queue, dropper = dropping_queue
    runs: list[str] = []

    async def a_worker_runs_it() -> None:  # before the client's retry reaches the server
        # The first part of PostgreSQL's answer can precede its commit: wait for the item.
        async with asyncio.timeout(30):
            while (claimed := await queue.claim(worker="w")) is None:
                await asyncio.sleep(0.01)
        runs.append(claimed.id)
        await queue.complete(claimed.id, tenant="t", worker="w")

    dropper.meanwhile = a_worker_runs_it
    enqueued = await queue.enqueue(WorkItem(id="lost-reply", tenant="t", payload={"n": "1"}))
    assert dropper.dropped == 1
    assert (enqueued.id, enqueued.payload) == ("lost-reply", {"n": "1"})
    assert await queue.claim(worker="w") is None  # no copy to run a second time
    assert runs == ["lost-reply"]
    assert (await queue.stats()).duplicates_suppressed == 0


async def test_an_enqueue_whose_answer_was_lost_returns_its_own_live_item(
    dropping_queue: tuple[WorkQueue, ReplyDropper],
) -> None:
    queue, dropper = dropping_queue
    enqueued = await queue.enqueue(WorkItem(id="lost-reply", tenant="t"))
    assert dropper.dropped == 1
    claimed = await queue.claim(worker="w")
    assert claimed is not None
    assert claimed.id == enqueued.id == "lost-reply"
    assert await queue.claim(worker="w") is None
    assert (await queue.stats()).duplicates_suppressed == 0


async def test_a_batch_whose_answer_was_lost_queues_each_item_once(
    dropping_queue: tuple[WorkQueue, ReplyDropper],
) -> None:
    queue, dropper = dropping_queue
    batch = [
        WorkItem(id="lost-reply", tenant="t", payload={"n": "1"}),
        WorkItem(id="b", tenant="t"),
        WorkItem(id="lost-reply", tenant="t", payload={"n": "2"}),  # a duplicate of the first
    ]
    answers = await queue.enqueue_many(batch)
    assert dropper.dropped == 1
    assert [(item.id, item.payload) for item in answers] == [
        ("lost-reply", {"n": "1"}),
        ("b", {}),
        ("lost-reply", {"n": "1"}),
    ]
    claimed = [await queue.claim(worker="w") for _ in range(3)]
    assert sorted(item.id for item in claimed if item is not None) == ["b", "lost-reply"]
    assert claimed[2] is None
