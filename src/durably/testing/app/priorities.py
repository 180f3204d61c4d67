"""`AppPriorities`: ``priority=`` orders a tenant's workflows, never the tenants' turns.

Order is read from outside: each body appends to a ledger of its own as it runs.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from durably.app import App, Context
from durably.errors import InvalidInputError, WorkflowFinishedError, WorkflowNotFoundError
from durably.stores.work import WorkPriority
from durably.testing.app.fixtures import NOTE, AppFixtures, fresh_id


class AppPriorities(AppFixtures):
    async def test_five_high_priority_starts_after_fifty_low_ones_run_first(self, app: App) -> None:
        ran: list[str] = []

        @app.workflow(priority=WorkPriority.LOW)
        async def job(ctx: Context) -> None:
            ran.append(ctx.id)

        low = [(await job.start()).id for _ in range(50)]
        high = [(await job.options(priority=WorkPriority.HIGH).start()).id for _ in range(5)]
        await app.run_until_idle(advance=False)
        # Made ready within one tick of a store's clock, workflows tie on age (and go by
        # id): the high ones as a set.
        assert sorted(ran[:5]) == sorted(high)
        assert sorted(ran[5:]) == sorted(low)

    async def test_an_urgent_tenant_still_takes_turns_with_a_low_one(self, app: App) -> None:
        ran: list[str] = []

        @app.workflow
        async def job(ctx: Context) -> None:
            ran.append(ctx.tenant)

        for _ in range(4):
            await job.options(tenant="loud", priority=WorkPriority.URGENT).start()
        await job.options(tenant="quiet", priority=WorkPriority.LOW).start()
        await app.run_until_idle(advance=False)
        assert "quiet" in ran[:2], ran

    async def test_a_priority_survives_a_message_a_cancel_and_a_resume(self, app: App) -> None:
        ran: list[str] = []

        @app.workflow
        async def listener(ctx: Context) -> str:
            note = await ctx.recv(NOTE)
            ran.append(ctx.id)
            return str(note)

        plain = [await listener.start(id=f"a-{fresh_id()}") for _ in range(3)]
        urgent = await listener.options(id=f"z-{fresh_id()}", priority=WorkPriority.URGENT).start()
        everyone = [*plain, urgent]
        await app.run_until_idle(advance=False)  # each waits for its message
        for handle in everyone:  # the urgent one's last
            await handle.send(NOTE, "hi")
        await app.run_until_idle(advance=False)
        assert ran[0] == urgent.id, ran
        ran.clear()
        waiting = [await listener.start(id=f"a-{fresh_id()}") for _ in range(3)]
        later = await listener.options(id=f"z-{fresh_id()}", priority=WorkPriority.URGENT).start()
        await app.run_until_idle(advance=False)
        for handle in [*waiting, later]:
            await handle.cancel()
        await app.run_until_idle(advance=False)
        for handle in [*waiting, later]:  # resumed in id order, the urgent one last
            assert await handle.resume()
        await app.run_until_idle(advance=False)
        for handle in [*waiting, later]:
            await handle.send(NOTE, "again")
        await app.run_until_idle(advance=False)
        assert ran[0] == later.id, ran

    async def test_a_fork_runs_at_its_originals_priority(self, app: App) -> None:
        ran: list[str] = []

        @app.workflow
        async def job(ctx: Context, name: str) -> None:
            ran.append(name)

        original = await job.options(priority=WorkPriority.URGENT).start("original")
        await app.run_until_idle(advance=False)
        for n in range(3):
            await job.start(f"plain{n}")
        await original.fork()  # forked last, run first
        await app.run_until_idle(advance=False)
        assert ran[:2] == ["original", "original"], ran

    async def test_a_gates_line_admits_by_priority_and_serves_each_at_its_own(
        self, app: App
    ) -> None:
        ran: list[str] = []

        @app.workflow(name=f"gated-{fresh_id()}", concurrency=1, concurrency_key=lambda n, k: k)
        async def job(ctx: Context, name: str, key: str) -> None:
            if name == "held":
                await ctx.recv(NOTE)
            ran.append(name)

        urgent = job.options(priority=WorkPriority.URGENT)
        held = await urgent.start("held", "x")
        await app.run_until_idle(advance=False)  # holds key x's slot, waiting
        for n in range(2):
            await job.options(priority=WorkPriority.LOW).start(f"low{n}", "x")
        await urgent.start("urgent", "x")  # queued last, behind the low ones
        for n in range(3):  # each admitted at once (a key of its own), not run yet
            await job.options(priority=WorkPriority.HIGH).start(f"high{n}", f"y{n}")
        await held.send(NOTE, "go")
        await app.run_until_idle(advance=False)
        # The line admits the urgent one first, and it is served as urgent: before the
        # high ones that were ready all along.
        assert ran[:2] == ["held", "urgent"], ran
        assert sorted(ran[2:5]) == ["high0", "high1", "high2"], ran
        assert sorted(ran[5:]) == ["low0", "low1"], ran

    async def test_a_priority_that_is_no_work_priority_is_refused_before_any_write(
        self, app: App
    ) -> None:
        @app.workflow
        async def job(ctx: Context) -> None:
            return None

        for bad in (20, 99, "high", 2.5):
            with pytest.raises(InvalidInputError, match="priority"):
                await job.options(id="refused", priority=bad).start()  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="priority"):
            app.workflow(name=f"k-{fresh_id()}", priority=40)  # type: ignore[call-overload]
        with pytest.raises(WorkflowNotFoundError):
            await job.get_handle("refused")  # nothing was stored


class AppPriorityChanges(AppFixtures):
    """`WorkflowHandle.set_priority` re-ranks a started workflow, for good."""

    async def test_a_ready_workflow_moved_up_after_its_start_runs_first(self, app: App) -> None:
        ran: list[str] = []

        @app.workflow
        async def job(ctx: Context, name: str) -> None:
            ran.append(name)

        handles = [await job.start(f"job{n}") for n in range(5)]
        assert await handles[3].set_priority(WorkPriority.URGENT)
        assert not await handles[3].set_priority(WorkPriority.URGENT)  # already so
        assert await handles[0].set_priority(WorkPriority.LOW)
        await app.run_until_idle(advance=False)
        assert ran[0] == "job3", ran
        assert ran[-1] == "job0", ran
        assert sorted(ran[1:4]) == ["job1", "job2", "job4"], ran

    async def test_a_changed_priority_is_kept_by_a_message_a_timer_and_a_childs_end(
        self, app: App
    ) -> None:
        ran: list[str] = []

        @app.workflow(name=f"parent-{fresh_id()}")
        async def parent(ctx: Context, name: str) -> None:
            await ctx.child(kid, name)
            ran.append(f"parent {name}")

        kids: dict[str, str] = {}

        @app.workflow(name=f"kid-{fresh_id()}")
        async def kid(ctx: Context, name: str) -> None:
            kids[name] = ctx.id
            await ctx.recv(NOTE)

        @app.workflow(name=f"listener-{fresh_id()}")
        async def listener(ctx: Context, name: str) -> None:
            await ctx.recv(NOTE)
            ran.append(f"heard {name}")
            await ctx.sleep(timedelta(minutes=1))
            ran.append(f"woke {name}")

        # Ids sort the moved one last: by age or id alone it would run last.
        plain = [await listener.start(f"a{n}", id=f"a{n}-{fresh_id()}") for n in range(3)]
        moved = await listener.start("z", id=f"z-{fresh_id()}")
        for n in range(3):
            await parent.start(f"a{n}", id=f"a{n}-{fresh_id()}")
        moved_parent = await parent.start("z", id=f"z-{fresh_id()}")
        await app.run_until_idle(advance=False)  # all wait: no scheduler entry is left
        assert await moved.set_priority(WorkPriority.HIGH)
        assert await moved_parent.set_priority(WorkPriority.HIGH)
        for handle in [*plain, moved]:
            await handle.send(NOTE, "go")
        for name in ["a0", "a1", "a2", "z"]:  # the moved parent's child last
            await (await kid.get_handle(kids[name])).send(NOTE, "done")
        await app.run_until_idle()
        heard = [entry for entry in ran if entry.startswith("heard")]
        woke = [entry for entry in ran if entry.startswith("woke")]
        ended = [entry for entry in ran if entry.startswith("parent")]
        assert heard[0] == "heard z", ran  # woken by its message
        assert woke[0] == "woke z", ran  # by its timer
        assert ended[0] == "parent z", ran  # by its child's end

    async def test_a_workflow_moved_up_in_its_gates_line_is_admitted_next(self, app: App) -> None:
        ran: list[str] = []

        @app.workflow(name=f"gated-{fresh_id()}", concurrency=1)
        async def job(ctx: Context, name: str) -> None:
            if name == "held":
                await ctx.recv(NOTE)
            ran.append(name)

        held = await job.start("held")
        await app.run_until_idle(advance=False)  # holds the slot, waiting
        queued = [await job.start(f"queued{n}") for n in range(3)]
        assert (await queued[2].status()).status.value == "queued"
        assert await queued[2].set_priority(WorkPriority.HIGH)
        assert await queued[0].set_priority(WorkPriority.LOW)
        await held.send(NOTE, "go")
        await app.run_until_idle(advance=False)
        assert ran == ["held", "queued2", "queued1", "queued0"], ran

    async def test_a_bad_priority_is_refused_before_any_write_and_a_finished_one_refused(
        self, app: App
    ) -> None:
        @app.workflow
        async def job(ctx: Context) -> None:
            await ctx.recv(NOTE)

        handle = await job.start()
        stores = await app.stores()
        for bad in (None, 20, 99, "high", 2.5, True):
            with pytest.raises(InvalidInputError, match="priority"):
                await handle.set_priority(bad)  # type: ignore[arg-type]
        assert await stores.checkpointer.peek(handle._key, ["durably:priority#1"]) == {}
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(f"never-{fresh_id()}")
        await handle.send(NOTE, "go")
        await app.run_until_idle(advance=False)
        with pytest.raises(WorkflowFinishedError):
            await handle.set_priority(WorkPriority.HIGH)
        assert await stores.checkpointer.peek(handle._key, ["durably:priority#1"]) == {}
