"""`AppFairness`: workflows served fairly across tenants, and bodies that start workflows
without end stopped by the App's `Limits`.

Order is read from outside: each body appends to a ledger of its own as it runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durably.app import App, Context, Limits, storage
from durably.clock import ManualClock
from durably.errors import WorkflowFailedError
from durably.testing.app.fixtures import NOTE, AppFactory, AppFixtures, fresh_id

NOISY_BURST = 2_000
STARTS_AT_ONCE = 8  # starts in flight while a burst is made (a bounded pool's share)


class AppFairness(AppFixtures):
    async def test_a_quiet_tenants_workflow_runs_among_the_first_beside_a_noisy_burst(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock())
        ran: list[str] = []

        @app.workflow
        async def job(ctx: Context, n: int) -> int:
            ran.append(ctx.tenant)
            return n

        burst = [fresh_id() for _ in range(NOISY_BURST)]
        for start in range(0, NOISY_BURST, STARTS_AT_ONCE):
            await asyncio.gather(
                *(
                    job.start(n, id=workflow, tenant="noisy")
                    for n, workflow in enumerate(burst[start : start + STARTS_AT_ONCE])
                )
            )
        quiet = await job.start(0, tenant="quiet")
        serving = asyncio.create_task(app.serve(concurrency=1, signals=False))
        try:
            assert await quiet.result(timeout=60) == 0
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        assert "quiet" in ran[:2], ran[:5]

    async def test_wakeups_through_the_app_keep_each_workflows_tenant(self, app: App) -> None:
        # Ids of one tenant sort before the other's: served by id they would not alternate.
        ran: list[str] = []

        @app.workflow
        async def listener(ctx: Context) -> str:
            note = await ctx.recv(NOTE)
            ran.append(ctx.tenant)
            return str(note)

        handles = [
            await listener.start(id=f"{tenant}-{n}-{fresh_id()}", tenant=tenant)
            for tenant in ("a", "b")
            for n in range(3)
        ]
        await app.run_until_idle(advance=False)  # each waits for its message
        for handle in handles:  # a's first, then b's
            await handle.send(NOTE, "hi")
        await app.run_until_idle(advance=False)
        assert ran == ["a", "b"] * 3
        for handle in handles:
            assert await handle.result(timeout=5) == "hi"

    async def test_a_body_starting_two_children_each_run_is_stopped_at_the_depth_limit(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock(), limits=Limits(depth=4))
        ran: dict[str, int] = {}

        # A short kind: each child's derived id adds it, and the ids must not be what stops
        # the chain.
        @app.workflow(name=f"bomb-{fresh_id()}")
        async def bomb(ctx: Context, depth: int) -> int:
            ran[ctx.id] = depth
            await ctx.start_child(bomb, depth + 1)
            await ctx.start_child(bomb, depth + 1)
            return depth

        root = await bomb.start(0, tenant="forks")
        await app.run_until_idle()
        assert sorted(ran.values()) == sorted(d for d in range(5) for _ in range(2**d))
        assert await _family(app, root.id, "forks") == sorted(ran)  # 31 workflows, no more
        assert await root.result(timeout=5) == 0
        deepest = [workflow for workflow, depth in ran.items() if depth == 4]
        for workflow in deepest:
            with pytest.raises(WorkflowFailedError) as failed:
                await (await app.get_handle(workflow, tenant="forks")).result(timeout=5)
            assert "WorkflowLimitError" in str(failed.value.error)
            assert "depth 5, over the limit of 4" in str(failed.value.error)

    async def test_a_body_starting_children_without_end_is_stopped_at_the_children_limit(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock(), limits=Limits(children=5))
        started: list[str] = []

        @app.workflow
        async def leaf(ctx: Context) -> None:
            started.append(ctx.id)

        @app.workflow
        async def spawner(ctx: Context) -> int:
            count = 0
            while True:  # no bound of its own
                await ctx.start_child(leaf)
                count += 1

        handle = await spawner.start(tenant="acme")
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError) as failed:
            await handle.result(timeout=5)
        error = str(failed.value.error)
        assert "WorkflowLimitError" in error
        assert "acme" in error
        assert "children 6" in error
        assert "limit of 5" in error
        assert len(started) == 5
        assert len(await _family(app, handle.id, "acme")) == 6

    async def test_starts_recorded_before_the_limits_were_lowered_replay_and_are_not_refused(
        self, app_factory: AppFactory
    ) -> None:
        if not self.shares_stores:
            pytest.skip("needs two Apps over one store")
        kind, leaf_kind = f"fan-{fresh_id()}", f"leaf-{fresh_id()}"
        ended: list[int] = []

        def deploy(app: App) -> Any:
            @app.workflow(name=leaf_kind)
            async def leaf(ctx: Context) -> None:
                return None

            @app.workflow(name=kind)
            async def fan(ctx: Context) -> int:
                for _ in range(3):
                    await ctx.start_child(leaf)
                await ctx.recv(NOTE)
                ended.append(3)
                return 3

            return fan

        before = await app_factory(ManualClock(), limits=Limits(children=5))
        handle = await deploy(before).start()
        await before.run_until_idle(advance=False)  # three children started, then it waits
        after = await app_factory(ManualClock(), limits=Limits(children=2))
        deploy(after)
        await (await after.get_handle(handle.id)).send(NOTE, "go")
        await after.run_until_idle(advance=False)
        assert await handle.result(timeout=5) == 3
        assert ended == [3]


async def _family(app: App, root: str, tenant: str) -> list[str]:
    """The ids of ``tenant``'s workflow ``root`` and of every workflow its body (and theirs)
    started under a derived id (``root/...``), as the store lists them."""
    checkpointer = (await app.stores()).checkpointer
    prefix = storage.key_prefix(tenant) or ""
    key = f"{prefix}{root}"
    found = [root] if await checkpointer.load(key) else []
    after = key
    while True:
        page = await checkpointer.workflows(after=after, limit=1000)
        family = [k[len(prefix) :] for k in page if k.startswith(f"{key}/")]
        found.extend(family)
        if len(family) < len(page) or len(page) < 1000:
            return sorted(found)
        after = page[-1]


__all__ = ["AppFairness"]
