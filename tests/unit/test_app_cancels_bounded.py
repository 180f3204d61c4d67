"""What a process keeps of the cancels it asks for is bounded by the passes running in it,
not by the cancels: 5,000 cancels of workflows no pass runs keep nothing."""

from __future__ import annotations

import asyncio

from durably.app import App, Context
from durably.clock import ManualClock
from durably.stores.status import WorkflowStatus


async def test_five_thousand_cancels_keep_nothing_once_asked() -> None:
    app = App("memory://", clock=ManualClock())

    @app.workflow(name="sleeps")
    async def sleeps(ctx: Context) -> None:
        await ctx.sleep(3600)

    sleeping = [await sleeps.start() for _ in range(2_500)]
    await app.run_until_idle(advance=False)  # each sleeps: no pass runs when cancelled
    never_run = [await sleeps.start() for _ in range(2_500)]
    handles = sleeping + never_run
    assert all(await asyncio.gather(*(handle.cancel() for handle in handles)))
    assert len(app._core.cancels) == 0
    for handle in never_run[::250]:  # ended at once, in the cancel
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
    await app.run_until_idle(advance=False)
    for handle in sleeping[::250]:  # woken to see it
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
    assert len(app._core.cancels) == 0
    await app.close()
