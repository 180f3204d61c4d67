"""`AppConcurrency`: concurrency inside a body. A pass never ends while a step it started
still runs, so a step beside a wait (in a bare ``asyncio.gather``, ``ctx.gather`` or a task
group, in either order) is paid exactly once across every pass; ``ctx.gather`` cancels
the siblings of a branch that fails, and suspends once its branches all finished or
suspended.

Effects are counted from outside: each step appends to a list the test owns."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from pydantic import JsonValue

from durably.app import App, Context, Step, Topic, WorkflowHandle
from durably.clock import ManualClock
from durably.errors import (
    InvalidInputError,
    NonRetryable,
    StepFailedError,
    WorkflowCancelledError,
    WorkflowFailedError,
)
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFixtures, fails_once, fresh_id

T = TypeVar("T")

GO: Topic[str] = Topic("go", str)

HOLD_SECONDS = 0.1
"""How long a step beside a wait keeps running once its sibling suspended, unless the
workflow's next pass begins first: long enough for a pass that did not wait for it to
report and the next to begin, and pay it again."""

WAITS = ["recv", "recv-timeout", "sleep", "sleep_until", "child", "start_child", "backoff"]
STYLES = ["asyncio.gather", "ctx.gather", "TaskGroup"]
FAN_OUT = 25
"""Steps beside one wait: more than any backing's connection pool holds at once."""


class Beside:
    """A step kept running beside a wait: ``suspended`` is set as the wait's branch ends
    (suspended or done), ``passes`` counts the body's passes, ``paid`` what the step
    `charging` registers was called with, once per run of its effect."""

    def __init__(self) -> None:
        self.suspended = asyncio.Event()
        self.passes = 0
        self.paid: list[str] = []
        self._next_pass = asyncio.Event()

    def charging(self, app: App) -> Step[[str], str]:
        """Register the step that pays: it notes the payment, then `hold`s."""

        @app.step
        async def charge(order: str) -> str:
            self.paid.append(order)
            await self.hold()
            return f"receipt-{order}"

        return charge

    def entered(self) -> None:
        """Call at the top of the body."""
        self.passes += 1
        if self.passes > 1:
            self._next_pass.set()

    async def hold(self) -> None:
        """Keep the calling step running past its sibling's suspension (`HOLD_SECONDS`,
        or until a later pass began: then the step is an orphan that pass could repeat)."""
        await self.suspended.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._next_pass.wait(), HOLD_SECONDS)

    async def waiting(self, wait: Awaitable[Any]) -> Any:
        """``wait``, noting when its branch ends."""
        try:
            return await wait
        finally:
            self.suspended.set()


async def sent_go(app: App, handle: WorkflowHandle[T]) -> T:
    """Run ``handle``'s workflow until it waits, send it `GO`, run it to its end: its result."""
    await app.run_until_idle()
    await handle.send(GO, "go")
    await app.run_until_idle()
    return await handle.result(timeout=5)


async def together(ctx: Context, style: str, branches: Sequence[Awaitable[Any]]) -> list[Any]:
    """``branches`` run concurrently in ``style``."""
    if style == "asyncio.gather":
        return list(await asyncio.gather(*branches))
    if style == "ctx.gather":
        return await ctx.gather(*branches)
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(_awaited(branch)) for branch in branches]
    return [task.result() for task in tasks]


async def _awaited(branch: Awaitable[Any]) -> Any:
    return await branch


class AppConcurrency(AppFixtures):
    @pytest.mark.parametrize("style", STYLES)
    @pytest.mark.parametrize("wait", WAITS)
    @pytest.mark.parametrize("step_first", [False, True], ids=["wait-first", "step-first"])
    async def test_a_step_beside_a_wait_is_paid_exactly_once(
        self, app: App, wait: str, style: str, step_first: bool
    ) -> None:
        beside = Beside()
        charge = beside.charging(app)
        tries: list[int] = []
        flaky = fails_once(app, tries)

        @app.workflow(name=f"kid-{fresh_id()}")
        async def kid(ctx: Context) -> str:
            return "kid done"

        async def waits(ctx: Context) -> object:
            if wait == "recv":
                return await ctx.recv(GO)
            if wait == "recv-timeout":
                return await ctx.recv(GO, timeout=30)
            if wait == "sleep":
                await ctx.sleep(30)
                return "slept"
            if wait == "sleep_until":
                await ctx.sleep_until(await ctx.now() + timedelta(seconds=30))
                return "slept"
            if wait == "child":
                return await ctx.child(kid)
            if wait == "start_child":
                return (await ctx.start_child(kid)).created
            return await flaky()

        @app.workflow(name=f"checkout-{fresh_id()}")
        async def checkout(ctx: Context, order: str) -> list[JsonValue]:
            beside.entered()
            branches = [beside.waiting(waits(ctx)), charge(order)]
            if step_first:
                branches.reverse()
            return await together(ctx, style, branches)

        handle = await checkout.start("order-1")
        await app.run_until_idle()
        if wait == "recv":
            await handle.send(GO, "go")
            await app.run_until_idle()
        results = await handle.result(timeout=5)
        assert "receipt-order-1" in results
        assert beside.paid == ["order-1"]
        assert tries == ([1, 1] if wait == "backoff" else [])

    @pytest.mark.parametrize("style", STYLES)
    @pytest.mark.parametrize("shape", ["starts-after-the-wait-suspended", "two-in-sequence"])
    async def test_each_step_of_a_branch_beside_a_wait_is_paid_once(
        self, app: App, style: str, shape: str
    ) -> None:
        beside = Beside()
        charge = beside.charging(app)

        async def branch() -> list[str]:
            if shape == "two-in-sequence":
                return [await charge("one"), await charge("two")]
            await beside.suspended.wait()  # its step starts once the sibling suspended
            return [await charge("late")]

        @app.workflow(name=f"branch-{fresh_id()}")
        async def checkout(ctx: Context) -> list[JsonValue]:
            beside.entered()
            return await together(ctx, style, [beside.waiting(ctx.recv(GO)), branch()])

        orders = ["one", "two"] if shape == "two-in-sequence" else ["late"]
        result = await sent_go(app, await checkout.start())
        assert result == ["go", [f"receipt-{order}" for order in orders]]
        assert beside.paid == orders

    @pytest.mark.parametrize("style", STYLES)
    async def test_a_fan_out_wider_than_a_pool_beside_a_wait_pays_each_step_once(
        self, app: App, style: str
    ) -> None:
        beside = Beside()
        charge = beside.charging(app)
        orders = [f"order-{n}" for n in range(FAN_OUT)]

        @app.workflow(name=f"fan-out-{fresh_id()}")
        async def checkout(ctx: Context) -> list[JsonValue]:
            beside.entered()
            branches = [beside.waiting(ctx.recv(GO)), *(charge(order) for order in orders)]
            return (await together(ctx, style, branches))[1:]

        result = await sent_go(app, await checkout.start())
        assert result == [f"receipt-{order}" for order in orders]
        assert sorted(beside.paid) == sorted(orders)

    async def test_a_cancel_while_a_gathered_step_runs_lets_it_land_and_ends_cancelled(
        self, app: App
    ) -> None:
        started, go_on = asyncio.Event(), asyncio.Event()
        paid: list[str] = []

        @app.step
        async def charge() -> str:
            paid.append("charge")
            started.set()
            await go_on.wait()
            return "receipt"

        @app.workflow(name=f"cancelled-{fresh_id()}")
        async def checkout(ctx: Context) -> list[JsonValue]:
            return list(await asyncio.gather(charge(), ctx.recv(GO)))

        handle = await checkout.start()
        running = asyncio.create_task(app.run_until_idle())
        await started.wait()
        assert await handle.cancel()
        go_on.set()
        await running
        await app.run_until_idle()
        with pytest.raises(WorkflowCancelledError):
            await handle.result(timeout=5)
        stored = await (await app.stores()).checkpointer.load(handle.id)
        assert [key for key in stored if key.endswith("charge#1")]  # it landed
        assert paid == ["charge"]

    async def test_a_step_running_when_a_sibling_fails_finishes_and_is_paid_once(
        self, app: App
    ) -> None:
        failed = asyncio.Event()
        seen: list[str] = []

        @app.step
        async def charge() -> str:
            seen.append("charge started")
            await failed.wait()  # still running when its sibling fails
            await asyncio.sleep(0)
            seen.append("charge finished")
            return "receipt"

        @app.step
        async def refuse() -> None:
            failed.set()
            raise NonRetryable("card declined")

        @app.workflow(name=f"declined-{fresh_id()}")
        async def checkout(ctx: Context) -> str:
            try:
                await ctx.gather(charge(), refuse())
            except StepFailedError as exc:
                outcome = exc.error_type
            await ctx.sleep(60)  # a later pass replays both
            return outcome

        handle = await checkout.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "NonRetryable"
        assert seen == ["charge started", "charge finished"]

    async def test_ctx_gather_cancels_the_siblings_of_a_failed_branch_and_raises(
        self, app: App
    ) -> None:
        cancelled: list[str] = []

        async def idle() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append("idle")
                raise

        async def broken() -> None:
            await asyncio.sleep(0)
            raise ValueError("tool crashed")

        @app.workflow(name=f"broken-{fresh_id()}")
        async def gathers(ctx: Context) -> None:
            await ctx.gather(idle(), broken())

        handle = await gathers.start()
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError, match="tool crashed"):
            await handle.result(timeout=5)
        assert cancelled == ["idle"]

    async def test_ctx_gather_returns_exceptions_in_place_when_asked(self, app: App) -> None:
        @app.step
        async def fine(n: int) -> int:
            return n

        async def broken() -> int:
            raise ValueError("tool crashed")

        @app.workflow(name=f"tolerant-{fresh_id()}")
        async def gathers(ctx: Context) -> list[str]:
            results = await ctx.gather(fine(1), broken(), fine(2), return_exceptions=True)
            return [repr(result) for result in results]

        handle = await gathers.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == ["1", "ValueError('tool crashed')", "2"]

    async def test_ctx_gather_sleeps_until_the_earliest_deadline_of_its_branches(
        self, app: App
    ) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)

        @app.workflow(name=f"naps-{fresh_id()}")
        async def naps(ctx: Context) -> str:
            await ctx.gather(ctx.sleep(50), ctx.sleep(5), ctx.recv(GO, timeout=20))
            return "rested"

        handle = await naps.start()
        assert await app.run_until_idle(advance=False) == 1
        assert (await handle.status()).status is WorkflowStatus.SLEEPING
        clock.advance(4)
        assert await app.run_until_idle(advance=False) == 0
        clock.advance(1)
        assert await app.run_until_idle(advance=False) == 1  # woken at the earliest
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "rested"

    async def test_ctx_gather_refuses_what_is_not_awaitable(self, app: App) -> None:
        @app.workflow(name=f"refused-{fresh_id()}")
        async def gathers(ctx: Context) -> str:
            try:
                await ctx.gather(ctx.sleep(1), 42)  # type: ignore[arg-type]
            except InvalidInputError as exc:
                return str(exc)
            return "accepted"

        handle = await gathers.start()
        await app.run_until_idle()
        assert "argument 1" in await handle.result(timeout=5)


__all__ = ["AppConcurrency", "Beside", "together"]
