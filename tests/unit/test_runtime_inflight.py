"""A pass never ends while a step it started still runs: the engine's drain, its bound, its
refusal of steps after the pass ended, and the guard of effects run in branches."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from durably import ManualClock
from durably.engine.runtime import Execution, resume
from durably.errors import PassEnded
from durably.memory import MemoryCheckpointer
from durably.stores import Blocked, Completed, Pass, Sleeping


async def claimed(checkpointer: MemoryCheckpointer, workflow: str = "wf") -> Pass:
    holder = await checkpointer.claim(workflow, 60.0, 30.0)
    assert holder is not None
    return holder


async def once(checkpointer: MemoryCheckpointer, body: Any, **options: Any) -> Any:
    """One pass: claim, resume, release."""
    holder = await claimed(checkpointer)
    try:
        return await resume(holder, checkpointer, body, **options)
    finally:
        await checkpointer.release(holder)


def ended_then(
    body: Callable[[Execution], Awaitable[object]], ended: asyncio.Event
) -> Callable[[Execution], Awaitable[object]]:
    """``body``, setting ``ended`` as its own task leaves it (however it leaves)."""

    async def run(run: Execution) -> object:
        try:
            return await body(run)
        finally:
            ended.set()

    return run


def runs_until_cut(
    cut: list[str], started: asyncio.Event | None = None
) -> Callable[[], Awaitable[str]]:
    """An effect that runs until it is cancelled, then notes it in ``cut``."""

    async def forever() -> str:
        if started is not None:
            started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cut.append("forever")
            raise
        return "never"

    return forever


async def test_a_pass_waits_for_a_step_a_bare_gather_left_running() -> None:
    checkpointer = MemoryCheckpointer()
    ended = asyncio.Event()
    paid: list[str] = []

    async def charge() -> str:
        paid.append("charge")
        await ended.wait()  # still running when the body has ended
        return "receipt"

    async def body(run: Execution) -> None:
        await asyncio.gather(run.awaiting("go"), run.step("charge", charge))

    outcome = await once(checkpointer, ended_then(body, ended))
    assert outcome == Blocked(waiting=frozenset({"go"}), listening=frozenset())
    assert (await checkpointer.load("wf"))["charge"] == "receipt"
    await once(checkpointer, body)  # the next pass replays it
    assert paid == ["charge"]


async def test_a_branch_goes_on_to_its_next_step_while_the_pass_drains() -> None:
    checkpointer = MemoryCheckpointer()
    ended = asyncio.Event()
    paid: list[str] = []

    async def effect(name: str) -> str:
        paid.append(name)
        await ended.wait()
        return name

    async def branch(run: Execution) -> None:
        await run.step("first", lambda: effect("first"))
        await run.step("second", lambda: effect("second"))

    async def body(run: Execution) -> None:
        await asyncio.gather(run.awaiting("go"), branch(run))

    await once(checkpointer, ended_then(body, ended))
    assert await checkpointer.load("wf") == {"first": "first", "second": "second"}
    await once(checkpointer, body)
    assert paid == ["first", "second"]


async def test_a_suspension_of_a_draining_branch_joins_the_outcome() -> None:
    checkpointer = MemoryCheckpointer()
    clock = ManualClock(1000.0)
    ended = asyncio.Event()

    async def slow() -> int:
        await ended.wait()
        return 1

    async def branch(run: Execution) -> None:
        await run.step("slow", slow)
        await run.sleep("nap", 5)

    async def body(run: Execution) -> None:
        await asyncio.gather(run.awaiting("go"), branch(run))

    outcome = await once(checkpointer, ended_then(body, ended), clock=clock)
    assert outcome == Blocked(waiting=frozenset({"go"}), listening=frozenset(), due=1005.0)


async def test_a_step_called_after_its_pass_ended_is_refused_and_never_runs() -> None:
    checkpointer = MemoryCheckpointer()
    later = asyncio.Event()
    refused: list[BaseException] = []
    paid: list[str] = []

    def charge() -> str:
        paid.append("charge")
        return "receipt"

    async def branch(run: Execution) -> None:
        await later.wait()  # not in a step when the body ends: not waited for
        try:
            await run.step("charge", charge)
        except PassEnded as exc:
            refused.append(exc)

    async def body(run: Execution) -> None:
        await asyncio.gather(run.awaiting("go"), branch(run))

    outcome = await once(checkpointer, body)
    assert isinstance(outcome, Blocked)
    later.set()
    while not refused:
        await asyncio.sleep(0)
    assert paid == []
    assert "charge" in str(refused[0])
    assert "charge" not in await checkpointer.load("wf")


async def test_a_body_that_returned_is_completed_though_a_branch_it_left_suspends() -> None:
    checkpointer = MemoryCheckpointer()
    ended = asyncio.Event()

    async def slow() -> int:
        await ended.wait()
        return 1

    async def branch(run: Execution) -> None:
        await run.step("slow", slow)
        await run.awaiting("never")

    async def body(run: Execution) -> str:
        asyncio.get_running_loop().create_task(branch(run))
        await asyncio.sleep(0)  # the branch starts its step
        return "done"

    assert await once(checkpointer, ended_then(body, ended)) == Completed("done")
    assert (await checkpointer.load("wf"))["slow"] == 1


async def test_a_task_group_aborting_on_a_suspension_lets_a_running_step_land() -> None:
    checkpointer = MemoryCheckpointer()
    suspended = asyncio.Event()
    seen: list[str] = []

    async def charge() -> str:
        seen.append("started")
        await suspended.wait()  # the group cancels this branch meanwhile
        await asyncio.sleep(0)
        seen.append("finished")
        return "receipt"

    async def waits(run: Execution) -> None:
        try:
            await run.awaiting("go")
        finally:
            suspended.set()

    async def body(run: Execution) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(run.step("charge", charge))
            group.create_task(waits(run))

    outcome = await once(checkpointer, body)
    assert outcome == Blocked(waiting=frozenset({"go"}), listening=frozenset())
    assert seen == ["started", "finished"]
    assert (await checkpointer.load("wf"))["charge"] == "receipt"


async def test_a_pass_cancelled_while_it_drains_cuts_the_steps_still_running() -> None:
    checkpointer = MemoryCheckpointer()
    ended = asyncio.Event()
    cut: list[str] = []
    forever = runs_until_cut(cut)

    async def body(run: Execution) -> None:
        await asyncio.gather(run.awaiting("go"), run.step("forever", forever))

    holder = await claimed(checkpointer)
    passing = asyncio.create_task(resume(holder, checkpointer, ended_then(body, ended)))
    await ended.wait()
    await asyncio.sleep(0)
    passing.cancel()  # the worker's shutdown, or a lost claim
    with pytest.raises(asyncio.CancelledError):
        await passing
    assert cut == ["forever"]
    assert "forever" not in await checkpointer.load("wf")


async def test_steps_still_running_past_the_drain_time_are_cut(
    caplog: pytest.LogCaptureFixture,
) -> None:
    checkpointer = MemoryCheckpointer()
    cut: list[str] = []
    forever = runs_until_cut(cut)

    async def body(run: Execution) -> None:
        await asyncio.gather(run.awaiting("go"), run.step("forever", forever))

    with caplog.at_level(logging.WARNING, logger="durably.engine"):
        outcome = await once(checkpointer, body, drain=0.05)
    assert outcome == Blocked(waiting=frozenset({"go"}), listening=frozenset())
    assert cut == ["forever"]
    assert "still running" in caplog.text


async def test_a_reservation_never_committed_does_not_hold_the_pass() -> None:
    checkpointer = MemoryCheckpointer()

    async def leaks_in_a_branch(run: Execution) -> None:
        run.reserve("left-in-a-branch")  # a task that ended without commit or abandon

    async def body(run: Execution) -> str:
        run.reserve("left-by-the-body")  # the pass's own task, which is the one draining
        await asyncio.get_running_loop().create_task(leaks_in_a_branch(run))
        return "done"

    outcome = await asyncio.wait_for(once(checkpointer, body), timeout=5)
    assert outcome == Completed("done")


async def test_abandon_and_a_failed_commit_give_the_step_back() -> None:
    checkpointer = MemoryCheckpointer()
    ended = asyncio.Event()

    async def branch(run: Execution) -> None:
        run.reserve("given-up")
        run.abandon("given-up")
        run.reserve("refused")
        with pytest.raises(ValueError):
            await run.commit("never-reserved", 1)
        run.abandon("refused")
        await ended.wait()  # alive, but running no step: not waited for

    async def body(run: Execution) -> None:
        asyncio.get_running_loop().create_task(branch(run))
        await asyncio.sleep(0)
        await run.awaiting("go")

    outcome = await asyncio.wait_for(once(checkpointer, body), timeout=5)
    assert isinstance(outcome, Blocked)
    ended.set()


async def test_sleep_until_a_past_deadline_records_it_and_does_not_suspend() -> None:
    checkpointer = MemoryCheckpointer()
    clock = ManualClock(1000.0)

    async def body(run: Execution) -> str:
        await run.sleep_until("nap", 400.0)
        return "awake"

    assert await once(checkpointer, body, clock=clock) == Completed("awake")
    assert await checkpointer.load("wf") == {"nap": 400.0}


async def test_sleep_until_a_later_deadline_sleeps_until_it() -> None:
    checkpointer = MemoryCheckpointer()
    clock = ManualClock(1000.0)

    async def body(run: Execution) -> str:
        await run.sleep_until("nap", 1500.0)
        return "awake"

    assert await once(checkpointer, body, clock=clock) == Sleeping("nap", 1500.0)
    clock.advance(500)
    assert await once(checkpointer, body, clock=clock) == Completed("awake")


@pytest.mark.parametrize("deadline", [float("nan"), float("inf"), True, "soon"])
async def test_sleep_until_refuses_a_deadline_that_is_not_a_finite_number(
    deadline: object,
) -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> None:
        await run.sleep_until("nap", deadline)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="deadline"):
        await once(checkpointer, body)
    assert await checkpointer.load("wf") == {}


@pytest.mark.parametrize("style", ["gather", "task group"])
async def test_a_stop_of_the_pass_cuts_a_step_running_in_a_branch(style: str) -> None:
    checkpointer = MemoryCheckpointer()
    started = asyncio.Event()
    cut: list[str] = []
    forever = runs_until_cut(cut, started)

    async def body(run: Execution) -> None:
        if style == "gather":
            await asyncio.gather(run.step("forever", forever), asyncio.Event().wait())
        else:
            async with asyncio.TaskGroup() as group:
                group.create_task(run.step("forever", forever))

    holder = await claimed(checkpointer)
    passing = asyncio.create_task(resume(holder, checkpointer, body))
    await started.wait()
    passing.cancel()  # the worker's shutdown, or a lost claim: not held for the step
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(passing, timeout=5)
    assert cut == ["forever"]
    assert "forever" not in await checkpointer.load("wf")


async def test_a_branch_cancelled_from_inside_the_body_sees_it_once_its_step_landed() -> None:
    checkpointer = MemoryCheckpointer()
    started, finish = asyncio.Event(), asyncio.Event()
    seen: list[str] = []

    async def charge() -> str:
        started.set()
        await finish.wait()
        seen.append("finished")
        return "receipt"

    async def body(run: Execution) -> str:
        branch: asyncio.Task[str] = asyncio.get_running_loop().create_task(
            run.step("charge", charge)
        )
        await started.wait()
        branch.cancel()  # the body's own cancel: the step is not cut
        finish.set()
        with pytest.raises(asyncio.CancelledError):
            await branch
        return "carried on"

    assert await once(checkpointer, body) == Completed("carried on")
    assert seen == ["finished"]
    assert (await checkpointer.load("wf"))["charge"] == "receipt"


class GatedWrites(MemoryCheckpointer):
    """A memory checkpointer whose writes wait for ``gate``, noting in ``events`` when
    each lands."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.events: list[str] = []

    async def record(self, holder: Pass, key: str, value: object) -> Any:
        await self.gate.wait()
        recorded = await super().record(holder, key, value)
        self.events.append(f"landed {key}")
        return recorded


async def test_a_record_a_branch_is_still_writing_when_the_body_ends_lands_first() -> None:
    checkpointer = GatedWrites()
    ended = asyncio.Event()

    async def open_late() -> None:
        await ended.wait()
        for _ in range(10):  # long after a pass that did not wait would have reported
            await asyncio.sleep(0)
        checkpointer.gate.set()

    async def body(run: Execution) -> None:
        await asyncio.gather(run.awaiting("go"), run.step("token", lambda: "t-1"))

    opening = asyncio.create_task(open_late())
    outcome = await once(checkpointer, ended_then(body, ended))
    checkpointer.events.append("reported")
    await opening
    assert isinstance(outcome, Blocked)
    assert checkpointer.events == ["landed token", "reported"]
