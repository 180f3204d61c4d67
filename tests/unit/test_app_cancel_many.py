"""A page's batched cancel (`durably.app._cancel_many`) on memory: a workflow named twice
is cancelled once, and a target whose start record names another tenant or another parent
is left alone, as one cancel leaves it."""

from __future__ import annotations

from durably import App, Context, ManualClock, Topic, WorkflowStatus
from durably.app._cancel_many import Target, cancel_many
from durably.app._tenancy import workflow_key
from durably.stores.cancelling import Cancelling

GO = Topic("go", str)


async def test_a_page_cancels_each_workflow_once_and_only_those_its_targets_name() -> None:
    app = App("memory://", clock=ManualClock())

    @app.workflow(name="waits")
    async def waits(ctx: Context) -> str:
        return str(await ctx.recv(GO))

    async with app:
        await waits.start_many([(), ()], ids=["a", "b"], tenant="acme")
        await app.run_until_idle()
        store = (await app.stores()).checkpointer
        assert isinstance(store, Cancelling)
        a, b = workflow_key("acme", "a"), workflow_key("acme", "b")
        targets = [
            Target(a, "acme"),
            Target(a, "acme"),  # named twice
            Target(b, "globex"),  # not of this tenant
            Target(b, "acme", parent="someone"),  # not a child of that parent
        ]
        assert await cancel_many(app._core, store, targets) == [True, False, False, False]
        await app.run_until_idle()
        counts = await app.workflow_counts(tenant="acme")
        assert counts.by_status == {
            WorkflowStatus.CANCELLED: 1,
            WorkflowStatus.BLOCKED: 1,
        }
