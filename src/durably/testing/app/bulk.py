"""`AppBulk`: a batch of starts starts each workflow as `start` would, and a bulk cancel
cancels each as `cancel` would: the generation asked for, what no pass runs ended at once,
a workflow finishing under the cancel left to its end, another tenant's untouched, a
repeat changing nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from durably.app import App, Context
from durably.errors import ConfigurationError, InvalidInputError, WorkflowConflictError
from durably.stores.cancelling import CancelAsk, Cancelling, CancelOutcome
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import NOTE, AppFixtures, fresh_id


class AppBulk(AppFixtures):
    async def test_start_many_starts_each_as_start_does(self, app: App) -> None:
        ran: list[int] = []

        @app.workflow
        async def doubled(ctx: Context, n: int) -> int:
            ran.append(n)
            return 2 * n

        @app.workflow
        async def other(ctx: Context) -> None:
            return None

        tenant = fresh_id()
        earlier = await doubled.start(7, id="b", tenant=tenant)
        handles = await doubled.start_many(
            [(1,), {"n": 2}, (3,)], ids=["a", "b", None], tenant=tenant
        )
        assert [h.created for h in handles] == [True, False, True]
        assert handles[1].id == earlier.id == "b"
        assert {h.tenant for h in handles} == {tenant}
        await app.run_until_idle()
        assert [await h.result() for h in handles] == [2, 14, 6]  # "b" kept its first args
        assert sorted(ran) == [1, 3, 7]
        counts = await app.workflow_counts(tenant=tenant)
        assert counts.by_status == {WorkflowStatus.COMPLETED: 3}
        # An id taken by another kind is refused as start refuses it, after the rest start.
        await other.start(id="taken", tenant=tenant)
        with pytest.raises(WorkflowConflictError):
            await doubled.start_many([(4,), (5,)], ids=["taken", "c"], tenant=tenant)
        assert (await (await app.get_handle("c", tenant=tenant)).status()).kind == doubled.kind

    async def test_start_many_refuses_bad_input_before_starting_any(self, app: App) -> None:
        @app.workflow
        async def single(ctx: Context, n: int) -> int:
            return n

        tenant = fresh_id()
        refusals: list[tuple[dict[str, Any], str]] = [
            ({"calls": [(1,), ("two",)]}, "n"),
            ({"calls": [(1,), (2,)], "ids": ["x"]}, "ids"),
            ({"calls": [(1,), (2,)], "ids": ["x", "x"]}, "twice"),
            ({"calls": [(n,) for n in range(1001)]}, "at most"),
            ({"calls": [7]}, "calls"),
        ]
        for arguments, named in refusals:
            with pytest.raises(InvalidInputError, match=named):
                await single.start_many(tenant=tenant, **arguments)
        assert (await app.workflow_counts(tenant=tenant)).total == 0

    async def test_start_many_of_a_gated_kind_takes_each_through_its_gate(self, app: App) -> None:
        @app.workflow(concurrency=1)
        async def one_at_a_time(ctx: Context, n: int) -> int:
            await ctx.recv(NOTE)
            return n

        @app.workflow
        async def other(ctx: Context) -> None:
            return None

        tenant = fresh_id()
        handles = await one_at_a_time.start_many([(n,) for n in range(3)], tenant=tenant)
        assert all(h.created for h in handles)
        await app.run_until_idle()
        counts = await app.workflow_counts(tenant=tenant)
        assert counts.by_status == {WorkflowStatus.BLOCKED: 1, WorkflowStatus.QUEUED: 2}
        # One by one too, a refused start is raised once the others are made.
        await other.start(id="taken", tenant=tenant)
        with pytest.raises(WorkflowConflictError):
            await one_at_a_time.start_many([(8,), (9,)], ids=["taken", "later"], tenant=tenant)
        later = await app.get_handle("later", tenant=tenant)
        assert (await later.status()).status is WorkflowStatus.QUEUED

    async def test_start_many_inside_a_body_is_refused(self, app: App) -> None:
        @app.workflow
        async def leaf(ctx: Context) -> None:
            return None

        @app.workflow
        async def fans(ctx: Context) -> str:
            try:
                await leaf.start_many([(), ()])
            except ConfigurationError as exc:
                return str(exc)
            return "started"

        handle = await fans.start()
        await app.run_until_idle()
        assert "start each with start()" in await handle.result()

    async def test_a_bulk_cancel_leaves_a_workflow_that_finishes_under_it_to_its_end(
        self, app: App
    ) -> None:
        @app.workflow
        async def waits(ctx: Context) -> str:
            return str(await ctx.recv(NOTE))

        acme, globex = f"acme-{fresh_id()}", f"globex-{fresh_id()}"
        for tenant in (acme, globex):
            await waits.start_many([(), (), ()], ids=["w0", "w1", "w2"], tenant=tenant)
        await app.run_until_idle()
        finishing = await app.get_handle("w0", tenant=acme)
        store = (await app.stores()).checkpointer
        assert isinstance(store, Cancelling)
        cancel_many = store.cancel_many

        async def finished_first(asks: Sequence[CancelAsk]) -> list[CancelOutcome]:
            # w0 ends between the page's read and its cancel: its pass completes it.
            await finishing.send(NOTE, "done")
            await app.run_until_idle()
            return await cancel_many(asks)

        store.cancel_many = finished_first  # type: ignore[method-assign]
        try:
            result = await app.cancel_workflows(tenant=acme)
        finally:
            del store.cancel_many
        assert sorted(w.workflow for w in result.changed) == ["w1", "w2"]
        assert result.examined == 3
        assert await finishing.result() == "done"
        history = [entry["key"] for entry in (await finishing.history())["history"]]
        assert not any(key.startswith("durably:cancel") for key in history)
        await app.run_until_idle()
        assert (await app.workflow_counts(tenant=acme)).by_status == {
            WorkflowStatus.COMPLETED: 1,
            WorkflowStatus.CANCELLED: 2,
        }
        # The other tenant's workflows of the same ids are untouched.
        assert (await app.workflow_counts(tenant=globex)).by_status == {WorkflowStatus.BLOCKED: 3}
        other = await app.get_handle("w1", tenant=globex)
        history = [entry["key"] for entry in (await other.history())["history"]]
        assert not any(key.startswith("durably:cancel") for key in history)
        # A repeat changes nothing.
        again = await app.cancel_workflows(tenant=acme)
        assert (again.changed, again.examined) == ([], 3)

    async def test_a_bulk_cancel_reaches_the_generation_a_resume_opened(self, app: App) -> None:
        ran: list[str] = []

        @app.workflow
        async def resumable(ctx: Context) -> str:
            ran.append(ctx.id)
            return str(await ctx.recv(NOTE))

        tenant = fresh_id()
        (handle,) = await resumable.start_many([()], tenant=tenant)
        first = await app.cancel_workflows(tenant=tenant)
        assert [w.workflow for w in first.changed] == [handle.id]
        assert (await handle.status()).status is WorkflowStatus.CANCELLED  # ended at once
        assert await handle.resume()
        second = await app.cancel_workflows(tenant=tenant)
        assert [w.workflow for w in second.changed] == [handle.id]
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
        history = [entry["key"] for entry in (await handle.history())["history"]]
        assert {"durably:cancel#1", "durably:cancel#2", "durably:cancelled#2"} <= set(history)
        await app.run_until_idle()
        assert ran == []  # neither generation ran
