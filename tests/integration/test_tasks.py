"""Tasks on every backing: typed arguments round-trip, the retry policy travels with the
item (full jitter, a non-retryable error dead-letters at once), batches, bad input
refused before any I/O, and `App.serve` running the tasks of the queues it is given."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import durably
from durably import App, ManualClock, NonRetryable, Retry, WorkPriority, WorkState
from durably.app import TaskOptions
from durably.errors import ConfigurationError, InvalidInputError
from tests.pg_service import postgres_dsn
from tests.redis_service import durable_server

__all__ = ["postgres_dsn"]

START = 1_700_000_000.0


class Address(BaseModel):
    street: str
    number: int


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
def dsn(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'app.db'}"
    if request.param == "redis":
        return durable_server().url
    return str(request.getfixturevalue("postgres_dsn"))


@pytest.fixture
async def app(dsn: str) -> AsyncIterator[App]:
    # A tenant of its own: the PostgreSQL database and Redis server are shared by tests.
    made = App(dsn, clock=ManualClock(START), tenant=f"t-{uuid.uuid4().hex[:10]}")
    async with made:
        yield made


def queue_name() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


async def test_typed_arguments_of_every_supported_type_round_trip(app: App) -> None:
    seen: list[tuple[object, ...]] = []

    @app.task(name="typed", queue=queue_name())
    async def typed(
        address: Address,
        day: date,
        moment: datetime,
        raw: bytes,
        amounts: list[Decimal],
        tags: set[str],
        lookup: dict[str, tuple[int, float]],
        note: str | None = None,
    ) -> None:
        seen.append((address, day, moment, raw, amounts, tags, lookup, note))

    given = (
        Address(street="Main", number=7),
        date(2024, 2, 29),
        datetime(2024, 3, 1, 12, 30, tzinfo=UTC),
        b"\x00\xffbytes",
        [Decimal("1.10"), Decimal("-3")],
        {"a", "b"},
        {"x": (1, 2.5)},
    )
    item = await typed.enqueue(*given, note="é")
    assert item.tenant == app.tenant
    assert item.queue == typed.queue
    assert len(item.id) == 32
    assert await app.run_until_idle() == 1
    assert seen == [(*given, "é")]


async def test_a_non_retryable_error_dead_letters_at_once(app: App) -> None:
    queue = queue_name()
    runs: list[str] = []

    @app.task(name="refuses", queue=queue, retry=Retry(max_attempts=5, non_retryable=(KeyError,)))
    async def refuses(how: str) -> None:
        runs.append(how)
        if how == "durably":
            raise NonRetryable("no point trying again")
        raise KeyError(how)

    await refuses.enqueue("durably")
    await refuses.enqueue("own type")
    await app.run_until_idle()
    assert sorted(runs) == ["durably", "own type"]
    queue_store = (await app.stores()).queue
    dead = await queue_store.dead_letters(tenant=app.tenant, queue=queue)
    assert len(dead) == 2
    assert all(item.attempts == 1 and item.state is WorkState.DEAD_LETTERED for item in dead)
    assert {item.failures[-1] for item in dead} == {
        "NonRetryable('no point trying again')",
        "KeyError('own type')",
    }


async def test_the_retry_policy_travels_with_the_item_and_ends_in_the_dead_letter(
    app: App,
) -> None:
    queue = queue_name()
    attempts: list[float] = []

    @app.task(name="flaky", queue=queue, retry=Retry(max_attempts=7, initial=2.0, maximum=10.0))
    async def flaky() -> None:
        attempts.append(app.clock.now())
        raise RuntimeError("down")

    item = await flaky.enqueue()
    assert item.payload["retry"] == "[7,2.0,10.0,2.0]"
    # A worker whose registration says otherwise still retries by the item's policy.
    flaky.options = TaskOptions(queue=queue, retry=Retry(max_attempts=2))
    await app.run_until_idle()
    # More than the queue policy's own five attempts: the task's seven decide.
    assert len(attempts) == 7
    waits = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    caps = [min(10.0, 2.0 * 2**n) for n in range(6)]
    assert all(0 <= wait <= cap for wait, cap in zip(waits, caps, strict=True))
    dead = await (await app.stores()).queue.dead_letters(tenant=app.tenant, queue=queue)
    assert [d.id for d in dead] == [item.id]
    assert dead[0].attempts == 7


async def test_full_jitter_spreads_retries_of_items_that_failed_together(app: App) -> None:
    queue = queue_name()

    @app.task(name="herd", queue=queue, retry=Retry(max_attempts=2, initial=60.0, maximum=60.0))
    async def herd(n: int) -> None:
        raise RuntimeError("all at once")

    await herd.enqueue_many([(n,) for n in range(40)])
    await app.run_until_idle(advance=False)  # each fails once; none is due again yet
    store = (await app.stores()).queue
    retried = []
    while (item := await store.claim(worker="peek", queue=queue, lease_seconds=1)) is not None:
        retried.append(item)
    assert retried == []  # nothing is due now
    stats = await store.stats(queue=queue)
    assert stats.depth == 40
    app.clock.advance(60.0)  # type: ignore[attr-defined]
    while (item := await store.claim(worker="peek", queue=queue)) is not None:
        retried.append(item)
    instants = sorted(item.available_at or 0.0 for item in retried)
    assert len(instants) == 40
    assert instants[0] >= START
    assert instants[-1] <= START + 60.0
    # Spread over the window, not in lockstep: many distinct instants, wide apart.
    assert len(set(instants)) >= 35
    assert instants[-1] - instants[0] > 30.0


async def test_enqueue_many_queues_each_call_with_its_own_dedupe_key(app: App) -> None:
    queue = queue_name()
    got: list[int] = []

    @app.task(name="many", queue=queue)
    async def many(n: int, *, label: str = "-") -> None:
        got.append(n)

    items = await many.enqueue_many(
        [(1,), {"n": 2, "label": "two"}, (3,), (4,)],
        dedupe_keys=["k1", None, "k1", None],
        priority=WorkPriority.HIGH,
    )
    assert items[2].id == items[0].id  # the live holder of k1 answered
    assert all(item.priority is WorkPriority.HIGH for item in items)
    await app.run_until_idle()
    assert sorted(got) == [1, 2, 4]


async def test_a_delayed_task_runs_at_its_time_under_a_manual_clock(app: App) -> None:
    ran: list[float] = []

    @app.task(name="later", queue=queue_name())
    async def later() -> None:
        ran.append(app.clock.now())

    await later.enqueue(delay=timedelta(minutes=5))
    assert await app.run_until_idle(advance=False) == 0
    await app.run_until_idle()
    assert ran == [START + 300.0]


async def test_bad_input_is_refused_before_any_io_naming_the_argument(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.task(name="strict", queue=queue_name())
    async def strict(count: int) -> None:
        return None

    async def no_io() -> None:
        raise AssertionError("the store was touched")

    monkeypatch.setattr(app._core, "stores", no_io)
    cases: list[tuple[tuple[tuple[Any, ...], dict[str, Any]], str]] = [
        ((("many",), {}), "count"),
        (((1, 2), {}), "strict"),
        (((1,), {"dedupe_key": ""}), "dedupe_key"),
        (((1,), {"delay": -1}), "delay"),
        (((1,), {"delay": float("nan")}), "delay"),
        (((1,), {"tenant": ""}), "tenant"),
        (((1,), {"priority": 5}), "priority"),
    ]
    for (args, kwargs), named in cases:
        with pytest.raises(InvalidInputError, match=named):
            await strict.enqueue(*args, **kwargs)
    with pytest.raises(InvalidInputError, match="dedupe_keys"):
        await strict.enqueue_many([(1,)], dedupe_keys=["a", "b"])
    with pytest.raises(InvalidInputError, match="calls"):
        await strict.enqueue_many([(1,)] * 1001)


def test_registration_refuses_reserved_names_and_keeps_later_options() -> None:
    app = App("memory://")
    with pytest.raises(ConfigurationError, match="delay"):

        @app.task(name="clash")
        async def clash(delay: float) -> None: ...

    @app.task(name="kept", concurrency=2, cron="*/5 * * * *")
    async def kept() -> None: ...

    assert dict(kept.options.more) == {"concurrency": 2, "cron": "*/5 * * * *"}
    with pytest.raises(ConfigurationError, match="twice"):
        app.task(name="kept")(kept.fn)


async def test_serve_runs_the_tasks_of_the_queues_it_is_given(dsn: str) -> None:
    app = App(dsn, tenant=f"t-{uuid.uuid4().hex[:10]}")
    served, other = queue_name(), queue_name()
    done = asyncio.Event()
    got: list[int] = []

    @app.task(name="served", queue=served)
    async def on_served(n: int) -> None:
        got.append(n)
        if len(got) == 20:
            done.set()

    @app.task(name="not_served", queue=other)
    async def on_other() -> None:
        raise AssertionError("its queue is not served")

    async with app:
        await on_served.enqueue_many([(n,) for n in range(20)])
        await on_other.enqueue()
        with pytest.raises(ConfigurationError, match="no registered task uses queue"):
            await app.serve(queues=["nope"], signals=False)
        serving = asyncio.create_task(app.serve(queues=[served], signals=False, poll=0.1))
        try:
            await asyncio.wait_for(done.wait(), 60)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        assert sorted(got) == list(range(20))
        stats = await (await app.stores()).queue.stats(queue=other)
        assert stats.depth == 1


def test_the_task_class_is_exported() -> None:
    assert durably.Task is durably.app.Task


async def test_a_dedupe_key_reused_after_completion_is_suppressed_until_its_ttl(
    app: App,
) -> None:
    queue = queue_name()
    sent: list[str] = []

    @app.task(name="welcome", queue=queue, dedupe_ttl=timedelta(hours=1))
    async def welcome(to: str) -> None:
        sent.append(to)

    first = await welcome.enqueue("ada", dedupe_key="welcome-ada")
    await app.run_until_idle()
    assert sent == ["ada"]
    app.clock.advance(3599)  # type: ignore[attr-defined]
    # The same requests again, after their jobs finished: nothing is sent twice.
    again = await welcome.enqueue("ada", dedupe_key="welcome-ada")
    many = await welcome.enqueue_many([("ada",)], dedupe_keys=["welcome-ada"])
    assert again.id == first.id
    assert again.state is WorkState.COMPLETED
    assert [item.id for item in many] == [first.id]
    assert await app.run_until_idle(advance=False) == 0
    assert sent == ["ada"]
    app.clock.advance(2)  # type: ignore[attr-defined]
    later = await welcome.enqueue("ada", dedupe_key="welcome-ada")
    assert later.id != first.id
    await app.run_until_idle()
    assert sent == ["ada", "ada"]


async def _lapse(app: App, queue: str) -> durably.WorkItem:
    """Claim the one due item of ``queue`` as a worker that dies mid-handler, let the lease
    lapse and reap it: the item as the reap left it."""
    store = (await app.stores()).queue
    held = await store.claim(worker="dies", queue=queue, lease_seconds=1.0)
    assert held is not None, "the item was not due"
    app.clock.advance(2.0)  # type: ignore[attr-defined]
    reaped = [item for item in await store.reap() if item.queue == queue]
    assert [item.id for item in reaped] == [held.id]
    return reaped[0]


async def test_a_lapsed_lease_is_retried_by_the_tasks_policy_then_dead_lettered(
    app: App,
) -> None:
    queue = queue_name()

    @app.task(name="dies", queue=queue, retry=Retry(max_attempts=2, initial=7.0, maximum=7.0))
    async def dies() -> None:
        raise AssertionError("never reached: its worker dies first")

    await dies.enqueue()
    first = await _lapse(app, queue)
    assert first.state is WorkState.QUEUED
    assert first.attempts == 1
    # The task's wait (7 s), not the queue's (1 s).
    assert first.available_at == pytest.approx(app.clock.now() + 7.0)
    app.clock.advance(7.0)  # type: ignore[attr-defined]
    second = await _lapse(app, queue)
    assert second.state is WorkState.DEAD_LETTERED
    assert second.attempts == 2


async def test_a_lapsed_lease_is_retried_past_the_queues_five_attempts_when_the_task_says(
    app: App,
) -> None:
    queue = queue_name()

    @app.task(name="dies", queue=queue, retry=Retry(max_attempts=8, initial=0.5, maximum=0.5))
    async def dies() -> None:
        raise AssertionError("never reached: its worker dies first")

    await dies.enqueue()
    states = []
    for _ in range(8):
        lapsed = await _lapse(app, queue)
        states.append((lapsed.attempts, lapsed.state))
        app.clock.advance(0.5)  # type: ignore[attr-defined]
    assert states == [
        *((n, WorkState.QUEUED) for n in range(1, 8)),
        (8, WorkState.DEAD_LETTERED),
    ]
