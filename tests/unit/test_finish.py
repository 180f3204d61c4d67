"""A pass's last record and its COMPLETED status in one write (`Finish`, `finish_workflow`),
and the App's use of it: a workflow without a parent ends in one write, a child writes its
result before it wakes its parent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import durably
from durably import ManualClock, WorkflowStatus
from durably.app import _layout as layout
from durably.claimcheck.wrappers import ClaimCheckedCheckpointer
from durably.engine.runtime import Execution, advance
from durably.engine.worker import Worker, start_workflow
from durably.memory import MemoryCheckpointer, MemoryScheduler
from durably.postgres import PostgresCheckpointer
from durably.redis import RedisCheckpointer
from durably.sqlite import SqliteCheckpointer
from durably.stores.workflows import Completed, Finish, Finishing, SplitDurable, finish_workflow


class Writes:
    """The writes made through a real `MemoryCheckpointer`, as (method, workflow, what)."""

    def __init__(self, checkpointer: Any) -> None:
        self.calls: list[tuple[str, str, object]] = []
        for name in ("record", "set_status", "finish"):
            setattr(checkpointer, name, self._spy(name, getattr(checkpointer, name)))

    def _spy(self, name: str, write: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        async def spied(holder: Any, what: object, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, holder.workflow, what))
            return await write(holder, what, *args, **kwargs)

        return spied

    def of(self, workflow: str) -> list[tuple[str, object]]:
        return [(name, what) for name, w, what in self.calls if w == workflow]


class WithoutFinish:
    """A user's own checkpointer: every `Checkpointer` method, but no `finish`."""

    def __init__(self, inner: MemoryCheckpointer) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "finish":
            raise AttributeError(name)
        return getattr(self._inner, name)


async def _served(durable: Any, kind: str, body: Callable[[Execution], Awaitable[object]]) -> None:
    worker = Worker(poll_seconds=0.02, maintenance_seconds=0.02)
    worker.workflow(kind, body, durable)
    task = asyncio.create_task(worker.run(install_signal_handlers=False))
    try:
        await start_workflow(durable, "wf-1", None)
        for _ in range(500):
            info = await durable.checkpointer.get_status("wf-1")
            if info is not None and info.status is WorkflowStatus.COMPLETED:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the workflow did not complete")
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=10)


async def _body(run: Execution) -> Finish[int]:
    await run.step("work", lambda: 1)
    return Finish("out", {"n": 1}, 7)


async def test_every_shipped_checkpointer_can_finish() -> None:
    # The conformance cases skip a checkpointer without finish: none shipped may lack it.
    for shipped in (MemoryCheckpointer, SqliteCheckpointer, PostgresCheckpointer):
        assert callable(getattr(shipped, "finish", None)), shipped
    assert callable(getattr(RedisCheckpointer, "finish", None))
    assert callable(getattr(ClaimCheckedCheckpointer, "finish", None))
    assert isinstance(MemoryCheckpointer(), Finishing)
    assert not isinstance(WithoutFinish(MemoryCheckpointer()), Finishing)


async def test_a_body_returning_finish_ends_with_its_record_and_status_in_one_write() -> None:
    checkpointer = MemoryCheckpointer()
    writes = Writes(checkpointer)
    durable = SplitDurable(checkpointer, MemoryScheduler(namespace="k"))
    await _served(durable, "k", _body)
    assert await checkpointer.load("wf-1") == {"input": None, "work": 1, "out": {"n": 1}}
    assert writes.of("wf-1") == [
        ("set_status", WorkflowStatus.RUNNING),
        ("record", "work"),
        ("finish", "out"),
    ]


async def test_a_checkpointer_without_finish_gets_record_then_set_status() -> None:
    inner = MemoryCheckpointer()
    writes = Writes(inner)
    durable = SplitDurable(WithoutFinish(inner), MemoryScheduler(namespace="k"))
    await _served(durable, "k", _body)
    assert (await inner.load("wf-1"))["out"] == {"n": 1}
    assert writes.of("wf-1")[-2:] == [("record", "out"), ("set_status", WorkflowStatus.COMPLETED)]
    holder = await inner.claim("wf-2", 30, 30)
    assert holder is not None
    info = await finish_workflow(WithoutFinish(inner), holder, "out", 2, attempts=1)
    assert (info.status, info.attempts) == (WorkflowStatus.COMPLETED, 1)
    assert await inner.load("wf-2") == {"out": 2}


async def test_advance_hands_a_finish_back_unwritten() -> None:
    checkpointer = MemoryCheckpointer()
    outcome = await advance("wf-1", checkpointer, _body)
    assert outcome == Completed(Finish("out", {"n": 1}, 7))
    assert await checkpointer.load("wf-1") == {"work": 1}
    assert await checkpointer.get_status("wf-1") is None


async def test_an_app_workflow_writes_its_result_with_the_completed_status() -> None:
    app = durably.App("memory://", clock=ManualClock(1_000.0))

    @app.workflow(name="double")
    async def double(ctx: durably.Context, n: int) -> int:
        return await ctx.step("twice", lambda: 2 * n)

    async with app:
        writes = Writes((await app.stores()).checkpointer)
        handle = await double.start(21, id="d")
        await app.run_until_idle()
        assert await handle.result() == 42
        assert writes.of("d")[-1] == ("finish", layout.RESULT)
        assert ("record", layout.RESULT) not in writes.of("d")
        assert not any(what is WorkflowStatus.COMPLETED for _, what in writes.of("d"))
        # A wakeup after the end reports the same end and writes no record.
        await app._core.durable("double").scheduler.make_ready("d")
        await app.run_until_idle()
        assert await handle.result() == 42
        assert writes.of("d")[-1] == ("set_status", WorkflowStatus.COMPLETED)


async def test_a_child_writes_its_result_before_it_wakes_its_parent() -> None:
    app = durably.App("memory://", clock=ManualClock(1_000.0))
    seen: list[bool] = []

    @app.workflow(name="child")
    async def child(ctx: durably.Context, n: int) -> int:
        return n + 1

    @app.workflow(name="parent")
    async def parent(ctx: durably.Context) -> int:
        return await ctx.child(child, 1, id="c")

    async with app:
        checkpointer = (await app.stores()).checkpointer
        writes = Writes(checkpointer)
        scheduler = app._core.durable("parent").scheduler
        make_ready = scheduler.make_ready

        async def woken(
            workflow: str, *, tenant: str | None = None, priority: int | None = None
        ) -> None:
            started = await checkpointer.load("c")
            if workflow == "p" and layout.START in started:  # the child wakes its parent
                seen.append(layout.RESULT in started)
            await make_ready(workflow, tenant=tenant, priority=priority)

        scheduler.make_ready = woken  # type: ignore[method-assign]
        handle = await parent.start(id="p")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 2
        assert seen == [True]
        assert ("record", layout.RESULT) in writes.of("c")
        assert writes.of("c")[-1] == ("set_status", WorkflowStatus.COMPLETED)
        assert writes.of("p")[-1] == ("finish", layout.RESULT)
