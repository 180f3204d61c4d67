"""``wf.options(id=, tenant=, timeout=)``: a start's options apart from its arguments, for
top-level starts and for a body's children; the keyword options keep working."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from durably import App, Context, ManualClock, WorkflowCancelledError
from durably.errors import ChildWorkflowFailedError, InvalidInputError


@pytest.fixture
def app() -> App:
    return App("memory://", clock=ManualClock())


async def test_options_start_a_workflow_with_its_id_tenant_and_timeout(app: App) -> None:
    @app.workflow(name="echo")
    async def echo(ctx: Context, text: str, *, loud: bool = False) -> str:
        await ctx.sleep(timedelta(hours=2))
        return f"{ctx.tenant}/{ctx.id}:{text.upper() if loud else text}"

    handle = await echo.options(id="e-1", tenant="acme").start("hi", loud=True)
    assert (handle.id, handle.tenant, handle.created) == ("e-1", "acme", True)
    again = await echo.options(id="e-1", tenant="acme").start("other")
    assert again.created is False
    timed = await echo.options(id="e-2", timeout=timedelta(hours=1)).start("late")
    await app.run_until_idle()
    assert await handle.result(timeout=5) == "acme/e-1:HI"
    with pytest.raises(WorkflowCancelledError) as cancelled:
        await timed.result(timeout=5)
    assert cancelled.value.timed_out


async def test_options_run_waits_for_the_result(app: App) -> None:
    @app.workflow(name="double")
    async def double(ctx: Context, n: int) -> int:
        return n * 2

    running = asyncio.create_task(double.options(id="d-1").run(21))
    while (await app.run_until_idle()) == 0:
        await asyncio.sleep(0)
    assert await running == 42


async def test_keyword_options_on_start_still_work(app: App) -> None:
    @app.workflow(name="echo")
    async def echo(ctx: Context, text: str) -> str:
        return f"{ctx.tenant}/{ctx.id}:{text}"

    handle = await echo.start("hi", id="e-1", tenant="acme", timeout=60)
    await app.run_until_idle()
    assert await handle.result(timeout=5) == "acme/e-1:hi"


async def test_a_childs_options_give_its_id_and_timeout(app: App) -> None:
    @app.workflow(name="slow")
    async def slow(ctx: Context, text: str) -> str:
        await ctx.sleep(timedelta(days=1))
        return text

    @app.workflow(name="parent")
    async def parent(ctx: Context) -> list[str]:
        fast = await ctx.child(slow.options(id="c-1"), "waited")
        handle = await ctx.start_child(slow.options(id="c-2"), "started")
        try:
            await ctx.child(slow.options(id="c-3", timeout=timedelta(hours=1)), "late")
        except ChildWorkflowFailedError as exc:
            return [fast, handle.id, exc.workflow, str(exc.error)]
        return [fast, handle.id]

    handle = await parent.start()
    await app.run_until_idle()
    assert await handle.result(timeout=5) == ["waited", "c-2", "c-3", "timed out"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("tenant", "parent's tenant"),
        ("twice", "given twice"),
    ],
)
async def test_a_child_option_that_cannot_apply_is_refused(
    app: App, call: str, message: str
) -> None:
    @app.workflow(name="leaf")
    async def leaf(ctx: Context) -> None:
        return None

    @app.workflow(name="parent")
    async def parent(ctx: Context) -> str:
        try:
            if call == "tenant":
                await ctx.child(leaf.options(tenant="other"))
            else:
                await ctx.child(leaf.options(id="a"), id="b")
        except InvalidInputError as exc:
            return str(exc)
        return "started"

    handle = await parent.start()
    await app.run_until_idle()
    assert message in await handle.result(timeout=5)
