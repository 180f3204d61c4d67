"""`AppContinueAsNew`: long-lived workflows. `ctx.continue_as_new` ends a run and begins
the same workflow afresh (same id, tenant, parent and handles; an empty history; the
messages not yet taken), and a run that would outgrow ``Limits.records`` parks."""

from __future__ import annotations

import asyncio

import pytest

from durably.app import App, Context, Limits, context
from durably.clock import ManualClock
from durably.errors import InvalidInputError, WorkflowCancelledError
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import NOTE, AppFactory, AppFixtures, fresh_id
from durably.testing.app.messages import stored_messages

ITERATIONS = 1_000
PER_RUN = 100


class AppContinueAsNew(AppFixtures):
    async def test_a_thousand_iterations_continuing_every_hundred_end_with_a_bounded_history(
        self, app: App
    ) -> None:
        checkpointer = (await app.stores()).checkpointer
        sizes: list[int] = []
        runs: list[int] = []

        @app.step
        async def add(i: int) -> int:
            # What the store holds of this workflow as each iteration runs.
            sizes.append(len(await checkpointer.load(context().workflow)))
            return i

        @app.workflow
        async def summing(ctx: Context, done: int, total: int) -> int:
            runs.append(ctx.run_number)
            for i in range(done, min(done + PER_RUN, ITERATIONS)):
                total += await add(i)
            if done + PER_RUN < ITERATIONS:
                ctx.continue_as_new(done + PER_RUN, total)
            return total

        handle = await summing.start(0, 0)
        await app.run_until_idle()
        assert await handle.result(timeout=5) == sum(range(ITERATIONS))
        assert len(sizes) == ITERATIONS  # each iteration's step ran once
        assert sorted(set(runs)) == list(range(1, ITERATIONS // PER_RUN + 1))
        assert max(sizes) <= PER_RUN + 5, f"the history grew to {max(sizes)} records"
        assert len(await checkpointer.load(handle.id)) <= PER_RUN + 5

    async def test_continue_as_new_keeps_the_id_tenant_parent_and_handle(self, app: App) -> None:
        @app.workflow
        async def counter(ctx: Context, n: int) -> int:
            if n < 3:
                ctx.continue_as_new(n + 1)
            return n * 10 + ctx.run_number

        @app.workflow
        async def parent(ctx: Context) -> int:
            return await ctx.child(counter, 0)

        workflow = fresh_id()
        handle = await parent.start(id=workflow, tenant="acme")
        before = await handle.status()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 34  # the child's last run (n=3, run 4)
        child = await app.get_handle(f"{workflow}/child:{counter.kind}#1", tenant="acme")
        info = await child.status()
        assert (info.tenant, info.parent, info.status) == (
            "acme",
            workflow,
            WorkflowStatus.COMPLETED,
        )
        assert await child.result(timeout=5) == 34
        again = await counter.get_handle(child.id, tenant="acme")  # found by its id still
        assert await again.result(timeout=5) == 34
        assert (await handle.status()).created == before.created

    async def test_messages_not_yet_taken_are_carried_to_the_next_run(self, app: App) -> None:
        @app.workflow
        async def one_per_run(ctx: Context, seen: list[str]) -> list[str]:
            note = await ctx.recv(NOTE)
            seen = [*seen, f"{ctx.run_number}:{note}"]
            if len(seen) < 4:
                ctx.continue_as_new(seen)
            return seen

        handle = await one_per_run.start([])
        for note in "abc":
            await handle.send(NOTE, note)
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.BLOCKED  # run 4 waits
        await handle.send(NOTE, "d")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == ["1:a", "2:b", "3:c", "4:d"]
        stored = await (await app.stores()).checkpointer.load(handle.id)
        assert stored_messages(stored) == []

    async def test_arguments_that_do_not_fit_are_refused_where_continue_as_new_is_called(
        self, app: App
    ) -> None:
        @app.workflow
        async def strict(ctx: Context, n: int) -> str:
            try:
                ctx.continue_as_new("not a number")
            except InvalidInputError as refused:
                return f"run {ctx.run_number}: {'n' in str(refused)}"
            return "continued"

        handle = await strict.start(1)
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "run 1: True"

    async def test_a_cancel_asked_while_a_run_ends_stops_the_next_run(self, app: App) -> None:
        marked: list[int] = []

        @app.step
        async def mark(run: int) -> int:
            marked.append(run)
            return run

        @app.step
        async def cancel_myself() -> None:
            await (await app.get_handle(context().workflow)).cancel()

        @app.workflow
        async def restless(ctx: Context) -> None:
            await mark(ctx.run_number)
            if ctx.run_number == 1:
                await cancel_myself()  # the cancel lands as this run ends
                ctx.continue_as_new()
            await ctx.sleep(3600)

        handle = await restless.start()
        await app.run_until_idle()
        with pytest.raises(WorkflowCancelledError):
            await handle.result(timeout=5)
        assert marked == [1]  # the next run was cancelled at its first step

    async def test_continue_as_new_inside_a_task_group_begins_the_next_run(self, app: App) -> None:
        @app.workflow
        async def grouped(ctx: Context, n: int) -> int:
            if n == 0:
                async with asyncio.TaskGroup() as group:
                    group.create_task(_a_uuid(ctx))
                    group.create_task(_continue_after_a_step(ctx))
            return ctx.run_number

        async def _a_uuid(ctx: Context) -> None:
            await ctx.uuid()

        async def _continue_after_a_step(ctx: Context) -> None:
            await ctx.now()
            ctx.continue_as_new(1)

        handle = await grouped.start(0)
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 2

    async def test_each_run_starts_children_and_names_steps_of_its_own(self, app: App) -> None:
        keys: list[str] = []

        @app.step
        async def charge(amount: int) -> int:
            keys.append(f"{context().workflow}/{context().step}")  # an idempotency key
            return amount

        @app.workflow
        async def double(ctx: Context, n: int) -> int:
            return 2 * n

        @app.workflow
        async def billing(ctx: Context, n: int, total: int) -> int:
            total += await charge(n) + await ctx.child(double, n)
            if n < 2:
                ctx.continue_as_new(n + 1, total)
            return total

        handle = await billing.start(0, 0)
        await app.run_until_idle()
        assert await handle.result(timeout=5) == (0 + 1 + 2) * 3
        assert len(set(keys)) == 3, keys  # the same step key, a key per run
        for run in (1, 2, 3):
            prefix = "" if run == 1 else f"run{run}/"
            child = await app.get_handle(f"{handle.id}/{prefix}child:{double.kind}#1")
            assert await child.result(timeout=5) == 2 * (run - 1)

    async def test_a_run_past_the_record_limit_parks_naming_continue_as_new(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock(), limits=Limits(records=20))
        ran: list[int] = []

        @app.step
        async def work(i: int) -> int:
            ran.append(i)
            return i

        @app.workflow
        async def unbounded(ctx: Context) -> int:
            return sum([await work(i) for i in range(50)])

        @app.workflow
        async def listening(ctx: Context) -> int:
            return len([await ctx.recv(NOTE) for _ in range(5)])

        handle = await unbounded.start()
        await app.run_until_idle()
        info = await handle.status()
        assert info.status is WorkflowStatus.PARKED
        assert info.last_error is not None
        assert "20" in info.last_error
        assert "continue_as_new" in info.last_error
        assert len(ran) < 20  # stopped before the limit, not after
        # Messages queued count against no limit: only what the body records does.
        quiet = await listening.start()
        for n in range(40):
            await quiet.send(NOTE, str(n))
        await app.run_until_idle()
        assert await quiet.result(timeout=5) == 5


__all__ = ["AppContinueAsNew"]
