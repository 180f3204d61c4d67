"""One App, one event loop after another: three ``asyncio.run`` calls in turn, and a
module-level App shared by two pytest-asyncio tests (each on a loop of its own), on every
backing. Stores opened on a loop that has stopped are let go and opened afresh (memory's
are kept: they are bound to no loop), and `App.serve` logs what stops it."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from durably.app import App, Context, Workflow
from durably.errors import ConfigurationError
from tests.pg_service import postgres_dsn
from tests.redis_service import durable_server

__all__ = ["postgres_dsn"]

REDIS_DB = 8
"""The Redis database index these tests own on the shared test server."""

BACKINGS = ["memory", "sqlite", "postgresql", "redis"]


def _dsn(backing: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backing == "memory":
        return "memory://"
    if backing == "sqlite":
        return f"sqlite:///{tmp_path / 'loops.db'}"
    if backing == "postgresql":
        return str(request.getfixturevalue("postgres_dsn"))
    pytest.importorskip("redis.asyncio")
    return f"{durable_server().url.rsplit('/', 1)[0]}/{REDIS_DB}"


def _register(app: App) -> tuple[Workflow[[int], int], list[int]]:
    @app.workflow(name=f"double-{uuid.uuid4().hex[:8]}")
    async def double(ctx: Context, n: int) -> int:
        return await twice(n)

    @app.step(name=f"twice-{uuid.uuid4().hex[:8]}")
    async def twice(n: int) -> int:
        ran.append(n)
        return 2 * n

    ran: list[int] = []
    return double, ran


async def _start_serve_and_wait(app: App, workflow: Workflow[[int], int], n: int) -> int:
    """Start a workflow, serve briefly until its result, stop serving."""
    handle = await workflow.start(n)
    serving = asyncio.create_task(app.serve(signals=False, poll=0.05))
    try:
        result: int = await handle.result(timeout=20)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    return result


@pytest.mark.parametrize("backing", BACKINGS)
def test_an_app_serves_three_asyncio_runs_in_turn(
    backing: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App(_dsn(backing, tmp_path, request))
    double, ran = _register(app)
    caplog.set_level(logging.WARNING, logger="durably")
    results = [asyncio.run(_start_serve_and_wait(app, double, n)) for n in (1, 2, 3)]
    assert results == [2, 4, 6]
    assert ran == [1, 2, 3]  # each step ran once, on the loop of its own run
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []  # no store of an earlier loop failed a later one's worker
    asyncio.run(app.close())


@pytest.mark.parametrize("backing", BACKINGS)
def test_a_workflow_started_on_one_loop_is_served_and_read_on_later_ones(
    backing: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = App(_dsn(backing, tmp_path, request))
    double, _ = _register(app)

    async def start() -> str:
        handle = await double.start(21)
        return str(handle.id)

    async def serve_until(id: str) -> int:
        serving = asyncio.create_task(app.serve(signals=False, poll=0.05))
        try:
            result: int = await (await app.get_handle(id)).result(timeout=20)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        return result

    async def read(id: str) -> int:
        result: int = await (await app.get_handle(id)).result(timeout=1)
        await app.close()
        return result

    id = asyncio.run(start())
    assert asyncio.run(serve_until(id)) == 42
    assert asyncio.run(read(id)) == 42  # memory's stores too outlive the loops


def test_a_loop_ends_while_its_pool_still_opens_a_connection(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A start makes the PostgreSQL pool grow in the background; a slow server leaves that
    # connection still opening when `asyncio.run` returns, and the pool's worker catches
    # the cancel the loop's end sends it and waits for more work. The loop must still end.
    import psycopg

    connect = psycopg.AsyncConnection.connect

    async def slow_connect(*args: object, **kwargs: object) -> object:
        await asyncio.sleep(0.3)
        return await connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", slow_connect)
    app = App(postgres_dsn)
    double, _ = _register(app)
    ids: list[str] = []

    async def start() -> None:
        ids.append(str((await double.start(21)).id))

    def runs() -> None:
        for _ in range(3):
            asyncio.run(start())

    thread = threading.Thread(target=runs, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), f"an event loop never ended ({len(ids)} of 3 runs returned)"
    assert len(set(ids)) == 3
    asyncio.run(app.close())


@pytest.mark.parametrize("backing", ["sqlite", "postgresql", "redis"])
@pytest.mark.parametrize("closed", [0, 1])
def test_closing_one_app_leaves_another_opened_beside_it_on_the_loop_open(
    backing: str, closed: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Two Apps open their stores at once on one loop, so the one that finishes opening
    # last sees the other's tasks start meanwhile; closing either must close only its
    # own (each order is a case: which one finishes last is the loop's to decide).
    apps = [App(_dsn(backing, tmp_path, request)) for _ in range(2)]
    kept = apps[1 - closed]
    double, _ = _register(kept)

    async def main() -> None:
        await asyncio.gather(*(app.stores() for app in apps))
        held = await kept.stores()
        await apps[closed].close()
        await asyncio.sleep(0.05)
        assert await kept.stores() is held  # not closed under it (and opened afresh)
        handle = await double.start(4)
        serving = asyncio.create_task(kept.serve(signals=False, poll=0.05))
        try:
            assert await handle.result(timeout=20) == 8
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
            await kept.close()

    asyncio.run(main())


def test_an_app_in_use_on_a_loop_still_running_in_another_thread_is_refused(
    tmp_path: Path,
) -> None:
    app = App(f"sqlite:///{tmp_path / 'threads.db'}")
    opened, done = threading.Event(), threading.Event()

    async def hold() -> None:
        await app.stores()
        opened.set()
        while not done.is_set():
            await asyncio.sleep(0.01)
        await app.close()

    async def use() -> None:
        with pytest.raises(ConfigurationError, match="another event loop"):
            await app.stores()

    holder = threading.Thread(target=asyncio.run, args=(hold(),))
    holder.start()
    try:
        assert opened.wait(10)
        asyncio.run(use())
    finally:
        done.set()
        holder.join()


def test_serve_logs_the_error_that_stops_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = App(f"sqlite:///{tmp_path / 'stops.db'}")
    _register(app)

    async def serve_unknown() -> None:
        # Run as a task nobody awaits until later: the log is where its error shows.
        serving = asyncio.create_task(app.serve(workflows=["no-such-kind"], signals=False))
        await asyncio.gather(serving, return_exceptions=True)
        await app.close()

    caplog.set_level(logging.ERROR, logger="durably.app")
    asyncio.run(serve_unknown())
    stopped = [r for r in caplog.records if r.getMessage().startswith("serve stopped")]
    assert len(stopped) == 1
    assert "ConfigurationError" in stopped[0].getMessage()
    assert "no-such-kind" in stopped[0].getMessage()


def test_serve_logs_an_unexpected_error_with_its_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = App(f"sqlite:///{tmp_path / 'breaks.db'}")
    _register(app)

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a store bound to another event loop")

    monkeypatch.setattr(app._driver, "serve", broken)

    async def serve() -> None:
        serving = asyncio.create_task(app.serve(signals=False))
        await asyncio.gather(serving, return_exceptions=True)

    caplog.set_level(logging.ERROR, logger="durably.app")
    asyncio.run(serve())
    stopped = [r for r in caplog.records if r.getMessage().startswith("serve stopped")]
    assert len(stopped) == 1
    assert stopped[0].exc_info is not None
    assert "another event loop" in str(stopped[0].exc_info[1])


# --- a module-level App, as a test module would keep one, used by two async tests --------

_SHARED: dict[str, tuple[App, Workflow[[int], int], list[int]]] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_shared_apps() -> Iterator[None]:
    yield
    for app, _, _ in _SHARED.values():
        asyncio.run(app.close())  # from a loop of its own: the tests' loops are closed


def _shared_app(
    backing: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[App, Workflow[[int], int], list[int]]:
    if backing not in _SHARED:
        app = App(_dsn(backing, tmp_path_factory.mktemp("shared"), request))
        double, ran = _register(app)
        _SHARED[backing] = (app, double, ran)
    return _SHARED[backing]


@pytest.mark.parametrize("backing", BACKINGS)
async def test_a_module_level_app_serves_a_first_async_test(
    backing: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    app, double, ran = _shared_app(backing, tmp_path_factory, request)
    assert await _start_serve_and_wait(app, double, 5) == 10
    assert ran.count(5) == 1


@pytest.mark.parametrize("backing", BACKINGS)
async def test_a_module_level_app_serves_a_second_async_test_on_its_own_loop(
    backing: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    app, double, ran = _shared_app(backing, tmp_path_factory, request)
    assert await _start_serve_and_wait(app, double, 6) == 12
    assert ran.count(6) == 1
