"""Waiting handles wake by push on every backing: a result written while a thousand
handles wait wakes them all at once, for a shared read or two rather than one per waiter,
and costs the store nothing while they wait; events and messages wake by push; a waiter
of another process wakes (SQLite); a handle started here sleeps without a first look,
yet sees an end announced before it waited; a waiter that leaves leaves nothing behind; a lost
listening connection falls back to polling and recovers.

Store calls are counted from outside, by a wrapper over the checkpointer's reads."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from durably.app import App, Context, Topic
from durably.app._waiters import FALLBACK_SECONDS
from durably.stores.status import WorkflowStatus
from durably.testing.app.messages import collector_paused
from tests.pg_service import postgres_dsn
from tests.redis_service import durable_server, start_server
from tests.serving import served

__all__ = ["postgres_dsn"]

REDIS_DB = 10
"""The Redis database index these tests own on the shared test server."""

BACKINGS = ["memory", "sqlite", "postgresql", "redis"]
READS = ("look", "get_status", "peek", "load", "history")
"""The checkpointer reads a waiting handle may make."""

WAITERS = 1000
WAKE_FIRST = 0.5
"""The first waiter returns its result within this of the write (seconds): one shared
read after the announcement, behind the worker's own writes on a loaded machine."""
WAKE_ALL = 2.0
"""Every waiter returns within this of the write: each takes steps of its own on one
event loop, in turn (a thousand bare future wakeups alone take some 20 ms on the shared
2-core test machine; polling took up to 0.5 s per waiter)."""

GO = Topic("go", str)


def _dsn(backing: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backing == "memory":
        return "memory://"
    if backing == "sqlite":
        return f"sqlite:///{tmp_path / 'push.db'}"
    if backing == "postgresql":
        return str(request.getfixturevalue("postgres_dsn"))
    pytest.importorskip("redis.asyncio")
    return f"{durable_server().url.rsplit('/', 1)[0]}/{REDIS_DB}"


@pytest.fixture(params=BACKINGS)
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[App]:
    made = App(_dsn(request.param, tmp_path, request), migrate=True)
    try:
        await made.stores()
        yield made
    finally:
        await made.close()


def _kind() -> str:
    return f"push-{uuid.uuid4().hex[:8]}"


def _count_reads(app: App, counts: Counter[str]) -> None:
    """Count every read of the App's checkpointer in ``counts`` (by method)."""
    checkpointer = app._core._stores.current.checkpointer  # type: ignore[union-attr]
    for name in READS:
        method = getattr(checkpointer, name)

        def counted(*args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
            counts[_name] += 1
            return _method(*args, **kwargs)

        setattr(checkpointer, name, counted)


def _stamp_writes(app: App, name: str, stamps: list[float]) -> None:
    """Stamp the moment each ``name`` write of the checkpointer returned (it landed)."""
    checkpointer = app._core._stores.current.checkpointer  # type: ignore[union-attr]
    method = getattr(checkpointer, name)

    async def stamped(*args: Any, **kwargs: Any) -> Any:
        result = await method(*args, **kwargs)
        stamps.append(time.perf_counter())
        return result

    setattr(checkpointer, name, stamped)


async def _until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting for the condition"
        await asyncio.sleep(0.005)


async def _follow_the_feed(app: App, handle: Any) -> None:
    """Have ``app`` follow its store's announcements, live: a handle that waits opens the
    subscription (a start alone does not)."""
    with contextlib.suppress(TimeoutError):
        await handle.result(timeout=0.05)
    await _live(app)


async def _live(app: App) -> None:
    """Wait until the App's subscription delivers (its listening connection is up)."""
    await _until(lambda: app._core.waiters.live)


async def test_a_result_wakes_a_thousand_waiting_handles_without_a_read_per_waiter(
    app: App,
) -> None:
    gated = app.workflow(name=_kind())(_gated)
    handle = await gated.start()
    async with served(app):
        await _until_status(handle, WorkflowStatus.BLOCKED)
        returned: list[float] = []

        async def wait(one: Any) -> str:
            value: str = await one.result(timeout=60)
            returned.append(time.perf_counter())
            return value

        waiting = [asyncio.create_task(wait(copy.copy(handle))) for _ in range(WAITERS)]
        await _until(lambda: len(app._core.waiters) == WAITERS)
        await _live(app)
        await asyncio.sleep(0.2)  # the first looks (and a connect's MISSED) are over
        counts: Counter[str] = Counter()
        _count_reads(app, counts)
        await asyncio.sleep(1.0)
        assert sum(counts.values()) < 1, f"waiting handles read the store: {counts}"
        written: list[float] = []
        _stamp_writes(app, "finish", written)
        # The collector kept out while timed: late in a full run its passes walk everything
        # the test process keeps alive (one took half a second), which is not the wake's.
        with collector_paused():
            await handle.send(GO, "done")
            assert await asyncio.gather(*waiting) == ["done"] * WAITERS
    late = sorted(at - written[0] for at in returned)
    first, p50, last = (late[0], late[len(late) // 2], late[-1])
    print(
        f"\n{WAITERS} waiters (ms): {first * 1e3:.1f} first, {p50 * 1e3:.1f} p50, {last * 1e3:.1f}"
    )
    assert first <= WAKE_FIRST, f"first waiter {first * 1000:.1f} ms after the write"
    assert last <= WAKE_ALL, f"last waiter {last * 1000:.1f} ms after the write"
    # The send's own check reads the start record; the wake is a few shared reads.
    assert sum(counts.values()) <= 10, f"reads after the write: {counts}"
    assert len(app._core.waiters) == 0


async def test_a_handle_started_here_sleeps_until_its_end_is_announced(app: App) -> None:
    gated = app.workflow(name=_kind())(_gated)
    await _follow_the_feed(app, await gated.start())
    handle = await gated.start()
    counts: Counter[str] = Counter()
    _count_reads(app, counts)  # the waiter's reads, not the start's own
    waiting = asyncio.create_task(handle.result(timeout=30))
    await _until(lambda: len(app._core.waiters) == 1)
    await asyncio.sleep(0.2)
    assert sum(counts.values()) == 0, f"a handle started here looked first: {counts}"
    async with served(app):
        await handle.send(GO, "done")
        assert await waiting == "done"


async def test_a_handle_started_here_that_ended_unwatched_returns_at_once(app: App) -> None:
    gated = app.workflow(name=_kind())(_gated)
    await _follow_the_feed(app, await gated.start())
    handle = await gated.start()
    async with served(app):
        await handle.send(GO, "ended")
        await _until_status(handle, WorkflowStatus.COMPLETED)
    assert await handle.result(timeout=PUSHED) == "ended"


PUSHED = 0.5
"""A wake by push lands well within this (seconds); the fallback poll would take longer
than the test's idle second before the write."""


async def test_a_parent_waiting_on_fifty_children_wakes_on_the_last(app: App) -> None:
    name = _kind()
    child = app.workflow(name=f"{name}-child")(_gated)

    @app.workflow(name=name)
    async def parent(ctx: Context) -> int:
        results = await asyncio.gather(*(ctx.child(child) for _ in range(50)))
        return len(results)

    handle = await parent.start()
    async with served(app):
        await _until_status(handle, WorkflowStatus.BLOCKED)
        ids = [f"{handle.id}/child:{name}-child#{n}" for n in range(1, 51)]
        children = [await app.get_handle(id) for id in ids]
        for each in children[:-1]:
            await each.send(GO, "go")
        for each in children[:-1]:
            await each.result(timeout=30)
        # Each child's end wakes the parent for a pass; it blocks again on the last.
        await _until_status(handle, WorkflowStatus.BLOCKED)
        await asyncio.sleep(1.0)  # no wake but the last child's
        started = time.perf_counter()
        await children[-1].send(GO, "go")
        assert await handle.result(timeout=30) == 50
        took = time.perf_counter() - started
    print(f"\nparent of 50 done {took * 1e3:.1f} ms after its last child's message")
    assert took <= PUSHED * 2, f"the parent ended {took:.2f} s after its last child's message"


async def test_get_event_and_recv_wake_by_push(app: App) -> None:
    @app.workflow(name=_kind())
    async def staged(ctx: Context) -> str:
        note = await ctx.recv(GO)
        await ctx.set_event("decision", note)
        return str(note)

    handle = await staged.start()
    async with served(app):
        await _until_status(handle, WorkflowStatus.BLOCKED)
        event = asyncio.create_task(handle.get_event("decision", timeout=30))
        await _until(lambda: len(app._core.waiters) == 1)
        await _live(app)
        await asyncio.sleep(0.2)
        counts: Counter[str] = Counter()
        _count_reads(app, counts)
        await asyncio.sleep(1.0)  # waiting costs the store nothing
        assert sum(counts.values()) == 0, f"a waiting get_event read the store: {counts}"
        started = time.perf_counter()
        await handle.send(GO, "approved")  # recv wakes, the body sets the event
        assert await event == "approved"
        took = time.perf_counter() - started
    print(f"\nsend to recv to set_event to get_event: {took * 1e3:.1f} ms")
    assert took <= PUSHED, f"the event came {took:.2f} s after the send"


def _ended_once(seen: Counter[tuple[str, str]], key: str) -> bool:
    return seen[(key, "e")] == 1


async def test_a_pass_announces_its_events_and_not_its_steps(app: App) -> None:
    """A step's record wakes no handle, so it goes unannounced (on PostgreSQL a notifying
    commit waits for every other notifying commit's flush); an event is announced. Counted
    on the store's own feed."""
    kind = _kind()

    @app.step(name=f"{kind}-step")
    async def step(n: int) -> int:
        return n

    @app.workflow(name=kind)
    async def body(ctx: Context, steps: int, event: bool) -> int:
        for n in range(steps):
            await step(n)
        if event:
            await ctx.set_event("done", steps)
        return steps

    seen: Counter[tuple[str, str]] = Counter()
    async with served(app):
        await _follow_the_feed(app, await body.start(0, False))
        waiters = app._core.waiters
        feed = (await app.stores()).changes
        assert feed is not None

        def heard(workflow: str, what: str) -> None:
            seen[(workflow, what)] += 1
            waiters._changed(workflow, what)

        feed.start(heard)  # in front of the App's own subscriber, which it still feeds
        await _live(app)
        runs = {"bare": (0, False), "steps": (5, False), "event": (0, True), "both": (5, True)}
        keys: dict[str, str] = {}
        for name, (steps, event) in runs.items():
            handle = await body.start(steps, event)
            assert await handle.result(timeout=30) == steps
            key = keys[name] = handle._key
            await _until(functools.partial(_ended_once, seen, key))
    records = {name: seen[(key, "r")] for name, key in keys.items()}
    assert records["steps"] == records["bare"], records
    assert records["event"] == records["bare"] + 1, records
    assert records["both"] == records["event"], records


async def test_a_waiter_that_leaves_leaves_nothing_behind(app: App) -> None:
    gated = app.workflow(name=_kind())(_gated)
    handle = await gated.start()
    async with served(app):
        await _until_status(handle, WorkflowStatus.BLOCKED)
        cancelled = [asyncio.create_task(copy.copy(handle).result()) for _ in range(100)]
        await _until(lambda: len(app._core.waiters) == 100)
        for task in cancelled:
            task.cancel()
        await asyncio.gather(*cancelled, return_exceptions=True)
        timed_out = [copy.copy(handle).result(timeout=0.2) for _ in range(100)]
        outcomes = await asyncio.gather(*timed_out, return_exceptions=True)
        assert all(isinstance(outcome, TimeoutError) for outcome in outcomes)
        with pytest.raises(TimeoutError):
            await handle.get_event("never", timeout=0.2)
        waiters = app._core.waiters
        assert len(waiters) == 0
        assert not waiters._waiting
        assert not waiters._looks
        assert not waiters._announced
        await handle.send(GO, "done")
        assert await handle.result(timeout=30) == "done"
        assert len(waiters) == 0


async def _gated(ctx: Context) -> str:
    return str(await ctx.recv(GO))


async def _until_status(handle: Any, status: WorkflowStatus) -> None:
    deadline = time.monotonic() + 30
    while (await handle.status()).status is not status:
        assert time.monotonic() < deadline, f"never {status}"
        await asyncio.sleep(0.01)


_OTHER_PROCESS = """
import asyncio, sys
from durably.app import App, Context, Topic
from durably.app._waiters import FALLBACK_SECONDS

GO = Topic("go", str)
app = App(sys.argv[1])


@app.workflow(name=sys.argv[2])
async def gated(ctx: Context) -> str:
    return str(await ctx.recv(GO))


async def main() -> None:
    serving = asyncio.create_task(app.serve(signals=False))
    await asyncio.sleep(float(sys.argv[3]))
    serving.cancel()
    await asyncio.gather(serving, return_exceptions=True)
    await app.close()


asyncio.run(main())
"""


async def test_a_waiter_wakes_on_a_result_another_process_wrote(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    app = App(f"sqlite:///{path}")
    kind = _kind()
    try:
        gated = app.workflow(name=kind)(_gated)
        handle = await gated.start()
        worker = await asyncio.create_subprocess_exec(
            *(sys.executable, "-c", _OTHER_PROCESS, f"sqlite:///{path}", kind, "60"),
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            await _until_status(handle, WorkflowStatus.BLOCKED)
            waiting = asyncio.create_task(handle.result(timeout=30))
            await _until(lambda: len(app._core.waiters) == 1)
            # Live: no polling, so only noticing the other process's write wakes it.
            assert app._core.waiters.live
            started = time.perf_counter()
            await handle.send(GO, "from afar")
            assert await waiting == "from afar"
            took = time.perf_counter() - started
        finally:
            worker.kill()
            await worker.wait()
    finally:
        await app.close()
    print(f"\nresult written by another process seen {took * 1e3:.1f} ms after the send")
    assert took <= PUSHED * 2


@pytest.mark.parametrize("backing", BACKINGS)
async def test_a_feed_that_is_down_falls_back_to_polling(
    backing: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    app = App(_dsn(backing, tmp_path, request), migrate=True)
    try:
        gated = app.workflow(name=_kind())(_gated)
        handle = await gated.start()
        async with served(app):
            await _until_status(handle, WorkflowStatus.BLOCKED)
            waiting = asyncio.create_task(handle.result(timeout=30))
            await _until(lambda: len(app._core.waiters) == 1)
            feed = (await app.stores()).changes
            assert feed is not None
            await feed.stop()
            assert not app._core.waiters.live
            await handle.send(GO, "polled")
            started = time.perf_counter()
            assert await waiting == "polled"
            took = time.perf_counter() - started
    finally:
        await app.close()
    assert took <= FALLBACK_SECONDS * 3, f"the polling waiter took {took:.2f} s"


async def test_a_dropped_postgres_listener_falls_back_and_recovers(postgres_dsn: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    app = App(postgres_dsn, migrate=True)
    dropped: list[int] = []

    async def drop() -> None:
        feed: Any = (await app.stores()).changes
        dropped.append(feed.listener.backend_pid)
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (dropped[0],))
        await _until(lambda: not app._core.waiters.live, timeout=10)

    try:
        await _falls_back_and_recovers(app, drop)
        feed: Any = (await app.stores()).changes
        assert feed.listener.backend_pid not in (None, dropped[0])  # a new connection
    finally:
        await app.close()


async def test_a_restarted_redis_falls_back_and_recovers() -> None:
    pytest.importorskip("redis.asyncio")
    server = start_server("--appendonly", "yes", "--appendfsync", "always")
    app = App(server.url)

    async def restart() -> None:
        server.restart()

    try:
        await _falls_back_and_recovers(app, restart)
    finally:
        await app.close()
        server.kill()


async def test_a_redis_app_whose_connections_are_killed_falls_back_and_recovers() -> None:
    redis_asyncio = pytest.importorskip("redis.asyncio")
    server = start_server()
    app = App(server.url)
    admin = redis_asyncio.Redis(host="127.0.0.1", port=server.port)

    async def kill() -> None:
        # The subscription first, then every other connection of the App (its idle waits
        # for work included); the admin's own is skipped.
        assert await admin.client_kill_filter(_type="pubsub") == 1
        await admin.client_kill_filter(_type="normal", skipme=True)
        await _until(lambda: not app._core.waiters.live, timeout=10)

    try:
        await _falls_back_and_recovers(app, kill)
    finally:
        await app.close()
        await admin.aclose()
        server.kill()


async def _falls_back_and_recovers(app: App, lose: Callable[[], Awaitable[None]]) -> None:
    """A waiter still gets its result though the feed was lost (``lose``) while it waited,
    and once the feed is back the next waiter wakes by push."""
    gated = app.workflow(name=_kind())(_gated)
    first, second = await gated.start(), await gated.start()
    async with served(app):
        await _until_status(first, WorkflowStatus.BLOCKED)
        await _until_status(second, WorkflowStatus.BLOCKED)
        waiting = asyncio.create_task(first.result(timeout=60))
        await _until(lambda: len(app._core.waiters) == 1)
        await _live(app)
        await lose()
        await first.send(GO, "after the loss")
        assert await waiting == "after the loss"
        await _live(app)  # listening again
        await _pushed(app, second)


async def _pushed(app: App, handle: Any) -> None:
    """``handle``'s result wakes its waiter by push: no read while it waits."""
    waiting = asyncio.create_task(handle.result(timeout=30))
    await _until(lambda: len(app._core.waiters) == 1)
    await asyncio.sleep(0.2)
    counts: Counter[str] = Counter()
    _count_reads(app, counts)
    await asyncio.sleep(FALLBACK_SECONDS * 1.5)  # a polling waiter would have looked
    assert sum(counts.values()) == 0, f"the waiter polled: {counts}"
    await handle.send(GO, "pushed")
    assert await waiting == "pushed"
