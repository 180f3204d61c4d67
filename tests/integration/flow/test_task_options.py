"""`@app.task`'s flow options: ``concurrency=`` (per task, or per ``concurrency_key=``),
``throttle=`` and ``cron=``/``tz=``, run through `App.serve` and `App.run_until_idle`,
and bad values refused when the task is registered."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from durably import App, ManualClock, Throttle
from durably.errors import ConfigurationError, InvalidInputError
from tests.redis_service import durable_server

START = datetime(2027, 1, 15, 8, 0, 30, tzinfo=UTC).timestamp()


def _dsn(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'app.db'}"
    if kind == "redis":
        return durable_server().url
    return str(request.getfixturevalue("postgres_dsn"))


def _names() -> tuple[str, str]:
    # A tenant and queue of their own: the PostgreSQL database and Redis server are shared.
    return f"t-{uuid.uuid4().hex[:10]}", f"q-{uuid.uuid4().hex[:10]}"


async def _serve_until(app: App, done: Counter[str], total: int) -> None:
    serving = asyncio.create_task(app.serve(signals=False, poll=0.01, concurrency=8))
    try:
        deadline = time.monotonic() + 60
        while sum(done.values()) < total:
            assert time.monotonic() < deadline, f"ran {sum(done.values())} of {total}"
            assert not serving.done(), serving
            await asyncio.sleep(0.02)
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgresql", "redis"])
async def test_concurrency_caps_the_runs_of_a_task_at_once_across_the_worker(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tenant, queue = _names()
    app = App(_dsn(kind, tmp_path, request), tenant=tenant)
    running, most, done = [0], [0], Counter[str]()

    @app.task(queue=queue, concurrency=2)
    async def capped(n: int) -> None:
        running[0] += 1
        most[0] = max(most[0], running[0])
        await asyncio.sleep(0.05)  # the worker (8 slots) claims more meanwhile, if let
        running[0] -= 1
        done[str(n)] += 1

    async with app:
        single = [await capped.enqueue(n) for n in range(3)]
        batch = await capped.enqueue_many([(n,) for n in range(3, 8)])
        for item in [*single, *batch]:  # enqueue_many carries the gates as enqueue does
            assert (item.concurrency_key, item.concurrency_limit) == (capped.name, 2)
        await _serve_until(app, done, 8)
    assert most[0] == 2
    assert done == Counter(str(n) for n in range(8))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_concurrency_key_caps_each_key_on_its_own(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tenant, queue = _names()
    app = App(_dsn(kind, tmp_path, request), tenant=tenant)
    running: Counter[str] = Counter()
    most: Counter[str] = Counter()
    together, done = [0, 0], Counter[str]()

    @app.task(queue=queue, concurrency=1, concurrency_key=lambda customer, n: customer)
    async def sync(customer: str, n: int) -> None:
        running[customer] += 1
        together[0] += 1
        most[customer] = max(most[customer], running[customer])
        together[1] = max(together[1], together[0])
        await asyncio.sleep(0.05)
        running[customer] -= 1
        together[0] -= 1
        done[customer] += 1

    async with app:
        for n in range(3):
            await sync.enqueue("acme", n)
            await sync.enqueue(customer="globex", n=n)
        await _serve_until(app, done, 6)
    assert most == Counter({"acme": 1, "globex": 1})
    assert together[1] == 2  # one of each key at a time, both keys at once
    assert done == Counter({"acme": 3, "globex": 3})


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("throttle", ["2/minute", Throttle(2, timedelta(minutes=1))])
async def test_a_throttle_spaces_the_starts_of_a_task(
    kind: str, throttle: object, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    clock = ManualClock(START)
    tenant, queue = _names()
    app = App(_dsn(kind, tmp_path, request), tenant=tenant, clock=clock)
    starts: list[float] = []

    @app.task(queue=queue, throttle=throttle)
    async def ping(n: int) -> None:
        starts.append(clock.now())

    async with app:
        await ping.enqueue_many([(n,) for n in range(3)])
        await app.run_until_idle(advance=False)
        assert starts == [START]  # two a minute: the next may start 30 s on
        clock.advance(29)
        await app.run_until_idle(advance=False)
        assert starts == [START]
        clock.advance(1)
        await app.run_until_idle(advance=False)
        clock.advance(30)
        await app.run_until_idle(advance=False)
    assert starts == [START, START + 30, START + 60]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_cron_task_runs_once_a_tick_with_the_ticks_time(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    clock = ManualClock(START)  # 08:00:30 UTC, 09:00:30 in Berlin
    tenant, queue = _names()
    app = App(_dsn(kind, tmp_path, request), tenant=tenant, clock=clock)
    seen: list[datetime] = []
    plain: list[float] = []

    @app.task(queue=queue, cron="* * * * *")
    async def minutely(at: datetime) -> None:
        seen.append(at)

    @app.task(queue=queue, cron="2 9 * * *", tz="Europe/Berlin")
    def morning() -> None:
        plain.append(clock.now())

    async with app:
        await app.run_until_idle()  # each schedule takes its mark: nothing runs yet
        assert seen == []
        assert plain == []
        for _ in range(3):
            clock.advance(60)
            await app.run_until_idle()
            await app.run_until_idle()  # the same tick again fires nothing
    assert seen == [datetime(2027, 1, 15, 8, minute, tzinfo=UTC) for minute in (1, 2, 3)]
    assert plain == [START + 120]  # 09:02 in Berlin is 08:02 UTC


async def test_a_cron_task_is_ticked_by_the_worker_serve_runs() -> None:
    clock = ManualClock(START)
    app = App("memory://", clock=clock)
    seen: list[datetime] = []

    @app.task(queue="cron", cron="* * * * *", concurrency=1)
    async def minutely(at: datetime) -> None:
        seen.append(at)

    serving = asyncio.create_task(app.serve(signals=False, maintenance=0.01, poll=0.01))
    try:
        await asyncio.sleep(0.1)  # maintenance takes the mark
        clock.advance(60)
        deadline = time.monotonic() + 30
        while not seen:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await app.close()
    assert seen == [datetime(2027, 1, 15, 8, 1, tzinfo=UTC)]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": "2"}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"concurrency": 2, "concurrency_key": "customer"}, "concurrency_key"),
        ({"concurrency_key": lambda n: str(n)}, "concurrency_key"),
        ({"throttle": 5}, "throttle"),
        ({"throttle": "lots"}, "throttle"),
        ({"throttle": "0/minute"}, "throttle"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": 5}, "cron"),
        ({"cron": "* * * * *", "tz": "Mars/Olympus"}, "tz"),
        ({"tz": "UTC"}, "tz"),
        ({"concurency": 2}, "concurency"),
    ],
)
def test_bad_flow_options_are_refused_at_registration(options: dict[str, Any], named: str) -> None:
    app = App("memory://")
    with pytest.raises(InvalidInputError, match=named):

        @app.task(name="bad", **options)
        async def bad(n: int) -> None: ...

    assert "bad" not in app.tasks


def test_a_cron_task_takes_no_parameter_or_one_datetime_and_a_name_of_its_own() -> None:
    app = App("memory://")
    with pytest.raises(ConfigurationError, match="datetime"):

        @app.task(name="counted", cron="* * * * *")
        async def counted(n: int) -> None: ...

    app.schedule("nightly", cron="0 3 * * *")
    with pytest.raises(ConfigurationError, match="nightly"):

        @app.task(name="nightly", cron="0 4 * * *")
        async def nightly() -> None: ...

    with pytest.raises(InvalidInputError, match="concurrency_key"):

        @app.task(cron="* * * * *", concurrency=1, concurrency_key=lambda: "x")
        async def keyed() -> None: ...


async def test_a_concurrency_key_that_answers_no_string_is_refused_before_any_io() -> None:
    app = App("memory://")

    @app.task(concurrency=1, concurrency_key=lambda n: n)
    async def numbered(n: int) -> None: ...

    @app.task(concurrency=1, concurrency_key=lambda n: 1 // n and "k")
    async def failing(n: int) -> None: ...

    with pytest.raises(InvalidInputError, match="must return a string"):
        await numbered.enqueue(1)
    with pytest.raises(InvalidInputError, match="concurrency_key failed"):
        await failing.enqueue(0)
    stores = await app.stores()
    assert await stores.queue.claim(worker="w") is None
    await app.close()
