"""Waiting handles wake by push on every backing: a result written while a thousand
handles wait wakes them all at once, for a shared read or two rather than one per waiter,
and costs the store nothing while they wait; events and messages wake by push; a waiter
of another process wakes (SQLite); a waiter that leaves leaves nothing behind; a lost
listening connection falls back to polling and recovers.

Store calls are counted from outside, by a wrapper over the checkpointer's reads."""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from durably.app import App, Context, Topic
from durably.stores.status import WorkflowStatus
from tests.pg_service import postgres_dsn
from tests.redis_service import durable_server
from tests.serving import served

__all__ = ["postgres_dsn"]

REDIS_DB = 10
"""The Redis database index these tests own on the shared test server."""

BACKINGS = ["memory", "sqlite", "postgresql", "redis"]
READS = ("get_status", "peek", "load", "history")
"""The checkpointer reads a waiting handle may make."""

WAITERS = 1000
WAKE_FIRST = 0.1
"""The first waiter returns its result within this of the write (seconds)."""
WAKE_ALL = 1.0
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
        await handle.send(GO, "done")
        assert await asyncio.gather(*waiting) == ["done"] * WAITERS
    late = sorted(at - written[0] for at in returned)
    first, p50, last = (late[0], late[len(late) // 2], late[-1])
    print(f"\n{WAITERS} waiters, ms: {first * 1e3:.1f} first, {p50 * 1e3:.1f} p50, {last * 1e3:.1f}")
    assert first <= WAKE_FIRST, f"first waiter {first * 1000:.1f} ms after the write"
    assert last <= WAKE_ALL, f"last waiter {last * 1000:.1f} ms after the write"
    # The send's own check reads the start record; the wake is a few shared reads.
    assert sum(counts.values()) <= 10, f"reads after the write: {counts}"
    assert len(app._core.waiters) == 0


async def _gated(ctx: Context) -> str:
    return str(await ctx.recv(GO))


async def _until_status(handle: Any, status: WorkflowStatus) -> None:
    deadline = time.monotonic() + 30
    while (await handle.status()).status is not status:
        assert time.monotonic() < deadline, f"never {status}"
        await asyncio.sleep(0.01)
