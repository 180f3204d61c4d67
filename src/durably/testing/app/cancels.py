"""`AppCancels`: a cancel reaches the generation it was asked for and no later one, a
workflow no pass has begun ends cancelled at once (also against a worker claiming it
meanwhile), and what a process keeps of its cancels stays bounded."""

from __future__ import annotations

import asyncio

import pytest

from durably.app import App, Context
from durably.errors import ChildWorkflowFailedError, WorkflowCancelledError
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import NOTE, AppFixtures, fresh_id


class AppCancels(AppFixtures):
    async def test_cancelling_a_workflow_no_pass_has_run_ends_it_cancelled_at_once(
        self, app: App
    ) -> None:
        ran: list[str] = []

        @app.workflow
        async def never_run(ctx: Context) -> str:
            ran.append(ctx.id)
            return "ran"

        handle = await never_run.start()
        assert (await handle.status()).status is WorkflowStatus.PENDING
        assert await handle.cancel()
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
        with pytest.raises(WorkflowCancelledError):
            await handle.result(timeout=0.001)  # at once: no worker has to run it first
        assert not await handle.cancel()
        await app.run_until_idle()
        assert ran == []
        assert (await handle.status()).status is WorkflowStatus.CANCELLED

    async def test_a_cancel_while_a_worker_holds_a_never_run_workflow_leaves_it_to_the_pass(
        self, app: App
    ) -> None:
        ran: list[str] = []

        @app.step
        async def effect() -> str:
            ran.append("effect")
            return "done"

        @app.workflow
        async def claimed(ctx: Context) -> str:
            return await effect()

        handle = await claimed.start()
        # A worker claimed it and has not reported yet: the cancel must not end it
        # under that worker's pass, which reads the cancel and ends it itself.
        checkpointer = (await app.stores()).checkpointer
        worker = await checkpointer.claim(handle.id, 30.0, 30.0)
        assert worker is not None
        assert await handle.cancel()
        assert (await handle.status()).status is WorkflowStatus.PENDING
        await checkpointer.release(worker)
        await app.run_until_idle()
        with pytest.raises(WorkflowCancelledError):
            await handle.result(timeout=5)
        assert ran == []  # the pass saw the cancel before its first step

    async def test_cancels_racing_a_worker_over_never_run_workflows_each_end_them_once(
        self, app: App
    ) -> None:
        effects: dict[str, int] = {}

        @app.step
        async def effect(workflow: str) -> int:
            effects[workflow] = effects.get(workflow, 0) + 1
            return effects[workflow]

        @app.workflow
        async def racing(ctx: Context) -> str | None:
            await effect(ctx.id)
            return await ctx.recv(NOTE)  # never sent: only a cancel ends it

        handles = [await racing.start() for _ in range(12)]
        serving = asyncio.create_task(app.serve(signals=False, poll=0.05, concurrency=4))
        try:
            answers = await asyncio.gather(*(handle.cancel() for handle in handles))
            for handle in handles:
                with pytest.raises(WorkflowCancelledError):
                    await handle.result(timeout=10)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        assert answers == [True] * len(handles)
        for handle in handles:
            assert (await handle.status()).status is WorkflowStatus.CANCELLED
            assert effects.get(handle.id, 0) <= 1  # ended by the pass or before it, once

    async def test_a_cancelled_parked_workflow_resumed_completes_in_the_process_that_cancelled(
        self, app: App
    ) -> None:
        deployed = {"argument": 1}

        @app.step
        async def fetch(n: int) -> int:
            return n

        @app.step
        async def double(n: int) -> int:
            return 2 * n

        @app.workflow
        async def changing(ctx: Context) -> int:
            value = await fetch(deployed["argument"])
            await ctx.sleep(60)
            return await double(value)  # a fresh step after the resume: where a cancel lands

        handle = await changing.start()
        await app.run_until_idle(advance=False)
        deployed["argument"] = 2  # a deploy changes the recorded call: the next pass parks
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.PARKED
        assert await handle.cancel()
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
        deployed["argument"] = 1
        assert await handle.resume()  # a new generation: the cancel was the last one's
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 2

    async def test_a_resumed_workflow_cancelled_before_it_runs_again_ends_at_once(
        self, app: App
    ) -> None:
        passes: list[str] = []

        @app.workflow
        async def failing(ctx: Context) -> str:
            passes.append(ctx.id)
            raise RuntimeError("broken")

        handle = await failing.start()
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.FAILED
        assert await handle.resume()
        assert (await handle.status()).status is WorkflowStatus.PENDING
        assert await handle.cancel()
        with pytest.raises(WorkflowCancelledError):
            await handle.result(timeout=0.001)
        await app.run_until_idle()
        assert passes == [handle.id]  # only the first generation's pass ran

    async def test_cancelling_a_child_no_pass_has_run_wakes_its_waiting_parent(
        self, app: App
    ) -> None:
        @app.workflow
        async def kid(ctx: Context) -> str:
            return "kid ran"

        @app.workflow
        async def parent(ctx: Context) -> str:
            try:
                return await ctx.child(kid, id=f"{ctx.id}-kid")
            except ChildWorkflowFailedError as exc:
                return f"child ended: {exc}"

        handle = await parent.start(id=fresh_id())
        # Only the parent's kind is served: its child is started and never run.
        serving = asyncio.create_task(app.serve(workflows=[parent.kind], signals=False, poll=0.05))
        try:
            while (await handle.status()).status is not WorkflowStatus.BLOCKED:
                await asyncio.sleep(0.01)
            child = await app.get_handle(f"{handle.id}-kid")
            assert (await child.status()).status is WorkflowStatus.PENDING
            assert await child.cancel()
            assert "cancelled" in await handle.result(timeout=10)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    async def test_what_a_process_keeps_of_its_cancels_does_not_grow_with_them(
        self, app: App
    ) -> None:
        @app.workflow
        async def sleeper(ctx: Context) -> None:
            await ctx.sleep(3600)

        handles = [await sleeper.start() for _ in range(30)]
        await app.run_until_idle(advance=False)  # each sleeps: no pass runs now
        for handle in handles:
            assert await handle.cancel()
        assert len(app._core.cancels) == 0
        await app.run_until_idle(advance=False)
        for handle in handles:
            with pytest.raises(WorkflowCancelledError):
                await handle.result(timeout=5)
        assert len(app._core.cancels) == 0


__all__ = ["AppCancels"]
