"""`WorkQueue.enqueue_many` on every backing: one round trip for 1,000 items, what
`enqueue` would answer per item, all-or-nothing on PostgreSQL and SQLite, and a
failure requeued at the caller's ``retry_at``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from durably import ManualClock
from durably.errors import InvalidInputError
from durably.stores import Stores, open_stores
from durably.stores.work import WorkItem, WorkState
from tests.pg_service import postgres_dsn
from tests.redis_service import durable_server

__all__ = ["postgres_dsn"]

START = 1_000_000.0


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
def dsn(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'queue.db'}"
    if request.param == "redis":
        return durable_server().url
    return str(request.getfixturevalue("postgres_dsn"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def stores(dsn: str, clock: ManualClock) -> AsyncIterator[Stores]:
    opened = await open_stores(dsn, clock=clock)
    await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


def items(tenant: str, queue: str, count: int, **fields: Any) -> list[WorkItem]:
    return [
        WorkItem(id=f"i{n}", tenant=tenant, queue=queue, payload={"n": str(n)}, **fields)
        for n in range(count)
    ]


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class _Trips:
    """Counts the round trips a store makes, by patching the one call each backing makes
    per round trip: a PostgreSQL statement, a SQLite transaction, a Redis script."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, dsn: str) -> None:
        self.count = 0
        if dsn.startswith("postgresql"):
            from durably.postgres import executor

            for session in (executor.PsycopgSession, executor.AsyncpgSession):
                for name in ("fetch", "count"):
                    self._wrap(monkeypatch, session, name)
        elif dsn.startswith("sqlite"):
            from durably.sqlite.connection import Database

            self._wrap(monkeypatch, Database, "transaction")
        elif dsn.startswith("redis"):
            from durably.redis.scripts import Script

            self._wrap(monkeypatch, Script, "run")

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
        original = getattr(owner, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)


async def test_a_thousand_items_go_in_one_round_trip_and_come_back_in_order(
    stores: Stores, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant, queue = fresh("t"), fresh("q")
    batch = items(tenant, queue, 1000)
    trips = _Trips(monkeypatch, dsn)
    queued = await stores.queue.enqueue_many(batch)
    if not dsn.startswith("memory"):
        assert trips.count == 1
    assert [item.id for item in queued] == [item.id for item in batch]
    assert all(item.state is WorkState.QUEUED for item in queued)
    assert (await stores.queue.stats(queue=queue)).depth == 1000
    # Claimed in enqueue order (one tenant, one priority, one instant).
    taken = await stores.queue.claim(worker="w", queue=queue)
    assert taken is not None
    assert (taken.id, taken.payload) == ("i0", {"n": "0"})


async def test_a_held_id_or_dedupe_key_answers_with_the_live_item_as_enqueue_does(
    stores: Stores,
) -> None:
    tenant, queue = fresh("t"), fresh("q")
    live = await stores.queue.enqueue(
        WorkItem(id="old", tenant=tenant, queue=queue, dedupe_key="k1")
    )
    answers = await stores.queue.enqueue_many(
        [
            WorkItem(id="a", tenant=tenant, queue=queue),
            WorkItem(id="b", tenant=tenant, queue=queue, dedupe_key="k1"),
            WorkItem(id="a", tenant=tenant, queue=queue, payload={"second": "yes"}),
            WorkItem(id="c", tenant=tenant, queue=queue, dedupe_key="k2"),
            WorkItem(id="d", tenant=tenant, queue=queue, dedupe_key="k2"),
        ]
    )
    assert [item.id for item in answers] == ["a", "old", "a", "c", "c"]
    assert answers[1].enqueued_at == live.enqueued_at
    assert answers[2].payload == {}  # the first "a", not the second's payload
    stats = await stores.queue.stats(queue=queue)
    assert stats.depth == 3
    assert stats.duplicates_suppressed == 3


async def test_an_empty_batch_does_nothing_and_a_bad_item_refuses_the_whole_batch(
    stores: Stores, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant, queue = fresh("t"), fresh("q")
    trips = _Trips(monkeypatch, dsn)
    assert await stores.queue.enqueue_many([]) == []
    bad = WorkItem.model_construct(id="", tenant=tenant, queue=queue, payload={})
    with pytest.raises(InvalidInputError, match="item_id"):
        await stores.queue.enqueue_many([*items(tenant, queue, 3), bad])
    with pytest.raises(InvalidInputError, match="at most 1,000"):
        await stores.queue.enqueue_many(items(tenant, queue, 1001))
    assert trips.count == 0  # refused before any I/O
    assert (await stores.queue.stats(queue=queue)).depth == 0


@pytest.mark.parametrize("dsn_kind", ["sqlite", "postgresql"])
async def test_a_batch_that_fails_midway_writes_nothing(
    dsn_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    dsn = (
        f"sqlite:///{tmp_path / 'atomic.db'}"
        if dsn_kind == "sqlite"
        else str(request.getfixturevalue("postgres_dsn"))
    )
    opened = await open_stores(dsn, clock=ManualClock(START))
    await opened.migrate()
    try:
        tenant, queue = fresh("t"), fresh("q")
        # A dead letter under an id makes the batch settle that item one by one, after the
        # statement wrote the others; a payload too big for the store then fails there.
        await opened.queue.enqueue(WorkItem(id="i5", tenant=tenant, queue=queue))
        dead = await opened.queue.claim(worker="w", queue=queue)
        assert dead is not None
        await opened.queue.fail("i5", tenant=tenant, worker="w", error="x", retryable=False)
        batch = items(tenant, queue, 10)
        original = opened.queue.enqueue_many

        def failing_late(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the connection broke midway")

        if dsn_kind == "postgresql":
            target: Any = opened.queue
            monkey = pytest.MonkeyPatch()
            monkey.setattr(target, "_insert", failing_late)
        else:
            from durably.sqlite.queue import BoundSqliteWorkQueue

            calls = {"n": 0}
            plain = BoundSqliteWorkQueue._enqueue

            def late(self: Any, item: WorkItem, payload: str, ttl: float | None) -> WorkItem:
                calls["n"] += 1
                if calls["n"] == 7:
                    raise RuntimeError("the connection broke midway")
                return plain(self, item, payload, ttl)

            monkey = pytest.MonkeyPatch()
            monkey.setattr(BoundSqliteWorkQueue, "_enqueue", late)
        try:
            with pytest.raises(Exception, match="broke midway"):
                await original(batch)
        finally:
            monkey.undo()
        stats = await opened.queue.stats(queue=queue)
        assert stats.depth == 0, "part of a failed batch was written"
        assert stats.dead_lettered == 1
    finally:
        await opened.close()


async def test_a_failure_with_retry_at_is_requeued_then_and_not_dead_lettered(
    stores: Stores,
) -> None:
    tenant, queue = fresh("t"), fresh("q")
    await stores.queue.enqueue(WorkItem(id="r", tenant=tenant, queue=queue))
    max_attempts = stores.queue.policy.max_attempts
    for attempt in range(1, max_attempts + 2):
        taken = await stores.queue.claim(worker="w", queue=queue)
        assert taken is not None, f"attempt {attempt} found nothing"
        failed = await stores.queue.fail(
            "r", tenant=tenant, worker="w", error="boom", retry_at=START
        )
        # Past the queue policy's max_attempts too: the caller's policy decided.
        assert failed.state is WorkState.QUEUED
        assert failed.available_at == START
        assert failed.attempts == attempt
    taken = await stores.queue.claim(worker="w", queue=queue)
    assert taken is not None
    dead = await stores.queue.fail(
        "r", tenant=tenant, worker="w", error="boom", retryable=False, retry_at=START
    )
    assert dead.state is WorkState.DEAD_LETTERED
    with pytest.raises(InvalidInputError, match="retry_at"):
        await stores.queue.fail("r", tenant=tenant, worker="w", error="x", retry_at=float("nan"))


async def _finish(stores: Stores, tenant: str, queue: str, *, dead: bool) -> None:
    taken = await stores.queue.claim(worker="w", queue=queue)
    assert taken is not None
    if dead:
        await stores.queue.fail(taken.id, tenant=tenant, worker="w", error="x", retryable=False)
    else:
        await stores.queue.complete(taken.id, tenant=tenant, worker="w")


@pytest.mark.parametrize("dead", [False, True], ids=["completed", "dead_lettered"])
async def test_a_dedupe_key_lasts_its_ttl_after_the_item_finished(
    stores: Stores, clock: ManualClock, dead: bool
) -> None:
    tenant, queue = fresh("t"), fresh("q")
    first = await stores.queue.enqueue(
        WorkItem(id="first", tenant=tenant, queue=queue, dedupe_key="mail-42"), dedupe_ttl=600
    )
    await _finish(stores, tenant, queue, dead=dead)
    clock.advance(599)
    again = await stores.queue.enqueue(
        WorkItem(id="again", tenant=tenant, queue=queue, dedupe_key="mail-42"), dedupe_ttl=600
    )
    # Inside the window: the finished item answers, and nothing is queued.
    assert again.id == first.id
    assert again.state is (WorkState.DEAD_LETTERED if dead else WorkState.COMPLETED)
    batch = await stores.queue.enqueue_many(
        [WorkItem(id="batched", tenant=tenant, queue=queue, dedupe_key="mail-42")],
        dedupe_ttl=600,
    )
    assert [item.id for item in batch] == [first.id]
    stats = await stores.queue.stats(queue=queue)
    assert stats.depth == 0
    assert stats.duplicates_suppressed == 2
    # Another tenant's key of the same name is its own.
    other = await stores.queue.enqueue(
        WorkItem(id="other", tenant=fresh("t"), queue=queue, dedupe_key="mail-42"), dedupe_ttl=600
    )
    assert other.id == "other"
    clock.advance(2)
    await stores.queue.reap()  # the sweep forgets the expired key
    later = await stores.queue.enqueue(
        WorkItem(id="later", tenant=tenant, queue=queue, dedupe_key="mail-42"), dedupe_ttl=600
    )
    assert later.id == "later"
    assert later.state is WorkState.QUEUED


async def test_without_a_ttl_a_finished_item_still_frees_its_key_at_once(
    stores: Stores,
) -> None:
    tenant, queue = fresh("t"), fresh("q")
    await stores.queue.enqueue(WorkItem(id="a", tenant=tenant, queue=queue, dedupe_key="k"))
    await _finish(stores, tenant, queue, dead=False)
    again = await stores.queue.enqueue(WorkItem(id="b", tenant=tenant, queue=queue, dedupe_key="k"))
    assert again.id == "b"


async def test_expired_keys_are_swept_by_reap(stores: Stores, clock: ManualClock, dsn: str) -> None:
    tenant, queue = fresh("t"), fresh("q")
    await stores.queue.enqueue_many(
        [WorkItem(id=f"i{n}", tenant=tenant, queue=queue, dedupe_key=f"k{n}") for n in range(30)],
        dedupe_ttl=5,
    )
    for _ in range(30):
        await _finish(stores, tenant, queue, dead=False)
    clock.advance(10)
    await stores.queue.reap()
    # Every key is free again: a new item takes each.
    renewed = await stores.queue.enqueue_many(
        [WorkItem(id=f"new{n}", tenant=tenant, queue=queue, dedupe_key=f"k{n}") for n in range(30)],
        dedupe_ttl=5,
    )
    assert [item.id for item in renewed] == [f"new{n}" for n in range(30)]
    if dsn.startswith("sqlite"):
        left = await stores.queue.database.transaction(  # type: ignore[attr-defined]
            lambda tx: tx.row(
                "SELECT count(*) FROM durably_dedupe_keys WHERE expires_at IS NOT NULL"
            )[0],
            write=False,
        )
        assert left == 0


async def test_a_bad_dedupe_ttl_is_refused_before_any_io(
    stores: Stores, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = _Trips(monkeypatch, dsn)
    item = WorkItem(id="x", tenant=fresh("t"), queue=fresh("q"), dedupe_key="k")
    for bad in (0, -1, float("nan"), "60", 10 * 366 * 86_400.0):
        with pytest.raises(InvalidInputError, match="dedupe_ttl"):
            await stores.queue.enqueue(item, dedupe_ttl=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="dedupe_ttl"):
            await stores.queue.enqueue_many([item], dedupe_ttl=bad)  # type: ignore[arg-type]
    assert trips.count == 0


async def test_queue_names_and_purge_leave_running_items_and_dead_letters(
    stores: Stores,
) -> None:
    queue, other = fresh("q"), fresh("q")
    tenants = [fresh("t") for _ in range(3)]
    for tenant in tenants:
        await stores.queue.enqueue_many(items(tenant, queue, 5, dedupe_key=None))
    await stores.queue.enqueue(WorkItem(id="keyed", tenant=tenants[0], queue=queue, dedupe_key="k"))
    await stores.queue.enqueue(WorkItem(id="elsewhere", tenant=tenants[0], queue=other))
    running = await stores.queue.claim(worker="w", queue=queue)
    assert running is not None
    dead = await stores.queue.claim(worker="w", queue=queue)
    assert dead is not None
    await stores.queue.fail(dead.id, tenant=dead.tenant, worker="w", error="x", retryable=False)
    names = await stores.queue.queue_names()
    assert {queue, other} <= set(names)
    assert names == sorted(names)
    # One tenant's first, then the rest.
    one = await stores.queue.purge(queue=queue, tenant=tenants[2])
    assert one == 5 - sum(1 for item in (running, dead) if item.tenant == tenants[2])
    rest = await stores.queue.purge(queue=queue)
    stats = await stores.queue.stats(queue=queue)
    assert one + rest == 14
    assert (stats.depth, stats.claimed, stats.dead_lettered) == (0, 1, 1)
    assert await stores.queue.claim(worker="w", queue=queue) is None
    assert (await stores.queue.stats(queue=other)).depth == 1
    # The purged item's key is free, and the queue serves new items as before.
    again = await stores.queue.enqueue(
        WorkItem(id="keyed2", tenant=tenants[0], queue=queue, dedupe_key="k")
    )
    assert again.id == "keyed2"
    taken = await stores.queue.claim(worker="w", queue=queue)
    assert taken is not None
    assert taken.id == "keyed2"
    await stores.queue.complete(running.id, tenant=running.tenant, worker="w")
    with pytest.raises(InvalidInputError, match="queue"):
        await stores.queue.purge(queue="")
    with pytest.raises(InvalidInputError, match="limit"):
        await stores.queue.queue_names(limit=0)


async def test_a_purge_of_more_dead_letters_than_a_batch_goes_batch_after_batch(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    import durably.postgres.queue
    import durably.redis.queue
    import durably.sqlite.queue
    import durably.stores.work

    for module in (durably.stores.work, durably.sqlite.queue, durably.postgres.queue):
        monkeypatch.setattr(module, "DEAD_PURGE_BATCH", 2)
    monkeypatch.setattr(durably.redis.queue, "DEAD_PURGE_BATCH", 2)
    queue, tenants = fresh("q"), [fresh("t"), fresh("t")]
    for tenant in tenants:
        await stores.queue.enqueue_many(items(tenant, queue, 5, dedupe_key=None))
    for _ in range(10):
        held = await stores.queue.claim(worker="w", queue=queue)
        assert held is not None
        await stores.queue.fail(held.id, tenant=held.tenant, worker="w", error="x", retryable=False)
    assert await stores.queue.purge_dead_letters(queue=queue, tenant=tenants[0]) == 5
    assert await stores.queue.purge_dead_letters(queue=queue) == 5
    assert (await stores.queue.stats(queue=queue)).dead_lettered == 0
