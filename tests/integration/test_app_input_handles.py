"""What a `WorkflowHandle` refuses, on every backing: an event key `ctx.set_event` would
refuse (before any I/O), events of a workflow that does not exist, and messages to a
workflow whose cancel was asked for but not yet seen by a pass."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import durably
from durably import App, Context, ManualClock, WorkflowStatus
from durably.errors import (
    InvalidInputError,
    WorkflowCancelledError,
    WorkflowFinishedError,
    WorkflowNotFoundError,
)
from tests.pg_service import postgres_dsn
from tests.redis_service import durable_server

__all__ = ["postgres_dsn"]

NOTE = durably.Topic("note", str)


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
    made = App(dsn, clock=ManualClock())
    async with made:
        yield made


def fresh_id() -> str:
    return f"wf-{uuid.uuid4().hex[:12]}"


def waiter(app: App) -> durably.Workflow[[], str | None]:
    """A workflow kind of this test's own that publishes an event, then waits for a note."""

    @app.workflow(name=f"waits-{uuid.uuid4().hex[:8]}")
    async def waits(ctx: Context) -> str | None:
        await ctx.set_event("stage", "waiting")
        return await ctx.recv(NOTE)

    return waits


@pytest.mark.parametrize(
    "key",
    [pytest.param(123, id="int"), "", "a\x00b", pytest.param("k" * 1_000_000, id="1MB")],
)
async def test_get_event_refuses_a_key_set_event_would_refuse(app: App, key: object) -> None:
    handle = await waiter(app).start(id=fresh_id())
    with pytest.raises(InvalidInputError, match="event key") as caught:
        await handle.get_event(key, timeout=0.3)  # type: ignore[arg-type]
    assert len(str(caught.value)) < 200


async def test_get_event_still_reads_a_published_event_and_waits_for_one(app: App) -> None:
    handle = await waiter(app).start(id=fresh_id())
    assert await handle.get_event("stage") is None  # no pass yet
    await app.run_until_idle(advance=False)
    assert await handle.get_event("stage", timeout=5) == "waiting"
    with pytest.raises(TimeoutError):
        await handle.get_event("other", timeout=0.05)


async def test_get_event_on_an_unknown_workflow_raises_not_found(app: App) -> None:
    handle = waiter(app).handle(fresh_id())  # no such workflow
    with pytest.raises(WorkflowNotFoundError):
        await handle.get_event("stage")
    with pytest.raises(WorkflowNotFoundError):
        await handle.get_event("stage", timeout=5)  # at once, not after the timeout


async def test_a_send_after_cancel_was_asked_is_refused_before_the_next_pass(app: App) -> None:
    waits = waiter(app)
    handle = await waits.start(id=fresh_id())
    await app.run_until_idle(advance=False)
    assert (await handle.status()).status is WorkflowStatus.BLOCKED
    assert await handle.cancel() is True
    with pytest.raises(WorkflowFinishedError, match="cancelled"):
        await handle.send(NOTE, "too late")
    await app.run_until_idle(advance=False)
    with pytest.raises(WorkflowCancelledError):
        await handle.result(timeout=5)
    with pytest.raises(WorkflowFinishedError, match="cancelled"):
        await handle.send(NOTE, "too late")


async def test_a_workflow_cancelled_before_its_first_pass_takes_no_message(app: App) -> None:
    handle = await waiter(app).start(id=fresh_id())
    await handle.cancel()
    with pytest.raises(WorkflowFinishedError, match="cancelled"):
        await handle.send(NOTE, "too late")


async def test_a_resumed_workflow_takes_messages_again(app: App) -> None:
    handle = await waiter(app).start(id=fresh_id())
    await app.run_until_idle(advance=False)
    await handle.cancel()
    await app.run_until_idle(advance=False)
    assert await handle.resume() is True
    await handle.send(NOTE, "after the resume")
    await app.run_until_idle(advance=False)
    assert await handle.result(timeout=5) == "after the resume"


async def test_a_send_to_a_running_workflow_is_still_delivered(app: App) -> None:
    handle = await waiter(app).start(id=fresh_id())
    await handle.send(NOTE, "early")  # before its first pass
    await app.run_until_idle(advance=False)
    assert await handle.result(timeout=5) == "early"


def test_a_huge_lease_or_retention_is_refused_on_every_backing(dsn: str) -> None:
    with pytest.raises(InvalidInputError, match="lease"):
        App(dsn, lease=1e300)
    with pytest.raises(InvalidInputError, match="retention"):
        App(dsn, retention=1e300)
