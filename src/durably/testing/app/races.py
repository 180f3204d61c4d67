"""`AppRaces`: a timeout or a cancel reaching a pass while it runs, a parked workflow that
stays parked whatever arrives, children that end with their parent, and calls that say
truly whether they changed anything."""

from __future__ import annotations

import asyncio

import pytest

from durably.app import App, Context, WorkflowHandle
from durably.clock import ManualClock
from durably.errors import (
    ChildWorkflowFailedError,
    WorkflowCancelledError,
    WorkflowNotFoundError,
)
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import NOTE, AppFactory, AppFixtures


class AppRaces(AppFixtures):
    async def test_a_timeout_passing_while_a_pass_runs_cancels_it_at_the_next_step(
        self, app: App
    ) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)
        ran: list[int] = []

        @app.step
        async def work(n: int) -> int:
            ran.append(n)
            clock.advance(60)  # each step takes a minute of the workflow's clock
            return n

        @app.workflow(timeout=150)
        async def busy(ctx: Context) -> int:
            return sum([await work(n) for n in range(5)])

        handle = await busy.start()
        await app.run_until_idle(advance=False)  # one pass: it never sleeps or waits
        with pytest.raises(WorkflowCancelledError) as ended:
            await handle.result(timeout=5)
        assert ended.value.timed_out
        assert ran == [0, 1, 2]  # the step after the deadline never started

    async def test_a_parked_workflow_stays_parked_whatever_arrives(self, app: App) -> None:
        deployed = {"argument": 1}
        calls: list[int] = []
        passes: list[int] = []

        @app.step
        async def fetch(n: int) -> int:
            calls.append(n)
            return n

        @app.workflow
        async def changing(ctx: Context) -> str:
            passes.append(1)
            await fetch(deployed["argument"])
            return str(await ctx.recv(NOTE))

        handle = await changing.start()
        await app.run_until_idle()
        deployed["argument"] = 2  # a deploy changes the call under the waiting workflow
        await handle.send(NOTE, "first")
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.PARKED
        ran = len(passes)
        await handle.send(NOTE, "second")  # kept for after the fix, runs nothing now
        await app.run_until_idle()
        assert len(passes) == ran
        assert (await handle.status()).status is WorkflowStatus.PARKED
        deployed["argument"] = 1
        assert await handle.resume()
        assert not await handle.resume()  # the first resume changed it; this one nothing
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "first"
        assert calls == [1]

    async def test_cancelling_a_parked_workflow_ends_it_cancelled_at_once(self, app: App) -> None:
        handle, _, calls = await _parked_by_a_deploy(app)
        assert await handle.cancel()
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
        with pytest.raises(WorkflowCancelledError):
            await handle.result(timeout=5)
        await app.run_until_idle()
        assert calls == [1]  # no pass ran the changed call again

    async def test_a_resume_waits_out_a_worker_looking_at_the_parked_workflow(
        self, app: App
    ) -> None:
        handle, deployed, _ = await _parked_by_a_deploy(app)
        deployed["argument"] = 1
        # A worker took a delivery of the parked workflow: it holds the claim while it
        # reads the status (and then runs nothing).
        checkpointer = (await app.stores()).checkpointer
        looking = await checkpointer.claim(handle.id, 30.0, 30.0)
        assert looking is not None

        async def let_go() -> None:
            await asyncio.sleep(0.3)
            await checkpointer.release(looking)

        releasing = asyncio.create_task(let_go())
        assert await handle.resume()
        await releasing
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 1

    async def test_only_the_cancel_that_changed_anything_says_so(self, app: App) -> None:
        @app.workflow
        async def waiting(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        handle = await waiting.start()
        await app.run_until_idle()
        answers = await asyncio.gather(*(handle.cancel() for _ in range(5)))
        assert sorted(answers) == [False, False, False, False, True]
        assert not await handle.cancel()

    async def test_a_cancel_made_just_before_a_fan_out_starts_no_child(self, app: App) -> None:
        reached, go_on = asyncio.Event(), asyncio.Event()

        @app.step
        async def prepare() -> int:
            reached.set()
            await go_on.wait()
            return 3

        @app.workflow
        async def child(ctx: Context, n: int) -> int:
            return n

        @app.workflow
        async def fanning(ctx: Context) -> list[int]:
            count = await prepare()
            return list(await asyncio.gather(*(ctx.child(child, n) for n in range(count))))

        handle = await fanning.start()
        running = asyncio.create_task(app.run_until_idle(advance=False))
        await reached.wait()
        assert await handle.cancel()
        go_on.set()
        await running
        with pytest.raises(WorkflowCancelledError):
            await handle.result(timeout=5)
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(f"{handle.id}/child:{child.kind}#1")

    async def test_a_cancel_from_another_app_reaches_a_running_pass(
        self, app_factory: AppFactory
    ) -> None:
        if not self.shares_stores:
            pytest.skip("two Apps over one store")
        clock = ManualClock()
        app, other = await app_factory(clock), await app_factory(clock)
        reached, go_on = asyncio.Event(), asyncio.Event()
        ran: list[int] = []

        @app.step
        async def work(n: int) -> int:
            ran.append(n)
            if n == 0:
                reached.set()
                await go_on.wait()
            return n

        @app.workflow(name="long-pass")
        async def long_pass(ctx: Context) -> int:
            return sum([await work(n) for n in range(4)])

        handle = await long_pass.start()
        running = asyncio.create_task(app.run_until_idle(advance=False))
        await reached.wait()
        assert await (await other.get_handle(handle.id)).cancel()
        await asyncio.sleep(1.1)  # the running pass looks for another's cancel each second
        go_on.set()
        await running
        with pytest.raises(WorkflowCancelledError):
            await handle.result(timeout=5)
        assert ran == [0]

    async def test_a_parent_s_timeout_cancels_its_children(self, app: App) -> None:
        @app.workflow
        async def waits(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        @app.workflow(timeout=3600)
        async def parent(ctx: Context) -> list[str | None]:
            return list(await asyncio.gather(*(ctx.child(waits) for _ in range(3))))

        handle = await parent.start()
        await app.run_until_idle()  # the ManualClock reaches the parent's deadline
        with pytest.raises(WorkflowCancelledError) as ended:
            await handle.result(timeout=5)
        assert ended.value.timed_out
        for n in range(1, 4):
            kid = await app.get_handle(f"{handle.id}/child:{waits.kind}#{n}")
            assert (await kid.status()).status is WorkflowStatus.CANCELLED

    async def test_a_child_swept_before_its_parent_read_its_end_fails_the_wait(
        self, app: App
    ) -> None:
        @app.workflow
        async def waits(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        @app.workflow
        async def parent(ctx: Context) -> str:
            try:
                await ctx.child(waits)
            except ChildWorkflowFailedError as exc:
                return str(exc)
            return "the child's end was read"

        handle = await parent.start()
        await app.run_until_idle()
        kid = f"{handle.id}/child:{waits.kind}#1"
        await app._core.durable(waits.kind).delete(kid)  # its records gone, as a sweep leaves it
        await app._core.durable(parent.kind).scheduler.make_ready(handle.id)
        await app.run_until_idle()
        assert "swept" in await handle.result(timeout=5)


async def _parked_by_a_deploy(app: App) -> tuple[WorkflowHandle[int], dict[str, int], list[int]]:
    """A workflow parked by a deploy that changed a recorded step's argument while it
    slept: its handle, the deployed argument (set it back to 1 to fix) and the arguments
    its step ran with."""
    deployed = {"argument": 1}
    calls: list[int] = []

    @app.step
    async def fetch(n: int) -> int:
        calls.append(n)
        return n

    @app.workflow
    async def changing(ctx: Context) -> int:
        value = await fetch(deployed["argument"])
        await ctx.sleep(60)
        return value

    handle = await changing.start()
    await app.run_until_idle(advance=False)
    deployed["argument"] = 2
    await app.run_until_idle()
    assert (await handle.status()).status is WorkflowStatus.PARKED
    return handle, deployed, calls


__all__ = ["AppRaces"]
