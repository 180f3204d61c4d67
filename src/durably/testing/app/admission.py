"""`AppAdmission`: per-tenant caps on running and started workflows, counted by the store.

Counts are read from the store (`Admitting.tenant_counts`) and from what each body writes
to a ledger of its own, never from the App's memory.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from durably.app import App, Context, Limits, storage
from durably.clock import ManualClock
from durably.errors import WorkflowFailedError, WorkflowLimitError, WorkflowNotFoundError
from durably.stores.admission import Admitting, TenantCounts
from durably.testing.app.fixtures import NOTE, AppFactory, AppFixtures, fresh_id

FORK_RUNNING = 6
FORK_STARTED = 20


async def _counts(app: App, tenant: str) -> TenantCounts:
    checkpointer = (await app.stores()).checkpointer
    assert isinstance(checkpointer, Admitting)
    return await checkpointer.tenant_counts(tenant)


class AppAdmission(AppFixtures):
    async def test_a_start_past_the_running_cap_is_refused_before_anything_is_stored(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock(), limits=Limits(running_per_tenant=3))
        tenant = f"capped-{fresh_id()}"

        @app.workflow
        async def waits(ctx: Context) -> str:
            return str(await ctx.recv(NOTE))

        handles = [await waits.start(tenant=tenant) for _ in range(3)]
        await app.run_until_idle(advance=False)  # each waits: still running
        refused_id = fresh_id()
        with pytest.raises(WorkflowLimitError) as refused:
            await waits.start(id=refused_id, tenant=tenant)
        assert (refused.value.limit, refused.value.maximum) == ("running_per_tenant", 3)
        assert (refused.value.tenant, refused.value.count) == (tenant, 4)
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(refused_id, tenant=tenant)  # nothing was stored
        # Another tenant is not counted against this one.
        other = await waits.start(tenant=f"other-{fresh_id()}")
        assert other.created
        assert await _counts(app, tenant) == TenantCounts(running=3, started=3)
        # One ends: its slot is free again.
        await handles[0].send(NOTE, "done")
        await app.run_until_idle(advance=False)
        assert await handles[0].result(timeout=5) == "done"
        assert await _counts(app, tenant) == TenantCounts(running=2, started=3)
        assert (await waits.start(id=refused_id, tenant=tenant)).created

    async def test_a_repeated_start_of_an_admitted_id_is_not_counted_twice(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock(), limits=Limits(running_per_tenant=1))
        tenant = f"again-{fresh_id()}"

        @app.workflow
        async def job(ctx: Context, n: int) -> int:
            return n

        workflow = fresh_id()
        assert (await job.start(1, id=workflow, tenant=tenant)).created
        again = await asyncio.gather(
            *(job.start(n, id=workflow, tenant=tenant) for n in range(2, 7))
        )
        assert not any(handle.created for handle in again)
        assert await _counts(app, tenant) == TenantCounts(running=1, started=1)

    async def test_the_started_cap_counts_finished_workflows_until_they_are_deleted(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock(), limits=Limits(started_per_tenant=2))
        tenant = f"kept-{fresh_id()}"

        @app.workflow
        async def job(ctx: Context, n: int) -> int:
            return n

        first = await job.start(1, tenant=tenant)
        await job.start(2, tenant=tenant)
        await app.run_until_idle()
        assert await first.result(timeout=5) == 1
        assert await _counts(app, tenant) == TenantCounts(running=0, started=2)
        with pytest.raises(WorkflowLimitError, match="started_per_tenant"):
            await job.start(3, tenant=tenant)
        stores = await app.stores()
        key = await storage.workflow_at(stores.checkpointer, tenant, first.id)
        assert key is not None
        deleted = await stores.durable(job.kind).delete(key)
        assert deleted > 0
        assert await _counts(app, tenant) == TenantCounts(running=0, started=1)
        assert (await job.start(3, tenant=tenant)).created

    async def test_every_way_a_workflow_ends_and_resumes_moves_its_running_count(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock())
        tenant = f"moves-{fresh_id()}"

        @app.workflow
        async def fails(ctx: Context) -> None:
            raise ValueError("no")

        @app.workflow
        async def waits(ctx: Context) -> str:
            return str(await ctx.recv(NOTE))

        failing = await fails.start(tenant=tenant)
        cancelled = await waits.start(tenant=tenant)
        never_run = await waits.start(tenant=tenant)
        assert await _counts(app, tenant) == TenantCounts(running=3, started=3)
        assert await never_run.cancel()  # ended at once, no pass
        await app.run_until_idle(advance=False)
        await cancelled.cancel()
        await app.run_until_idle(advance=False)
        with pytest.raises(WorkflowFailedError):
            await failing.result(timeout=5)
        assert await _counts(app, tenant) == TenantCounts(running=0, started=3)
        assert await cancelled.resume()  # unfinished again
        assert await _counts(app, tenant) == TenantCounts(running=1, started=3)
        await cancelled.send(NOTE, "back")
        await app.run_until_idle(advance=False)
        assert await cancelled.result(timeout=5) == "back"
        assert await _counts(app, tenant) == TenantCounts(running=0, started=3)

    async def test_the_retention_sweep_frees_the_started_count(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock())
        tenant = f"swept-{fresh_id()}"

        @app.workflow
        async def job(ctx: Context) -> None:
            return None

        handles = [await job.start(tenant=tenant) for _ in range(3)]
        await app.run_until_idle()
        for handle in handles:
            await handle.result(timeout=5)
        checkpointer = (await app.stores()).checkpointer
        # A store shared with other tests may hold older finished workflows: sweep them all.
        cutoff = datetime.now(UTC) + timedelta(days=1)
        swept = 0
        while batch := await checkpointer.sweep(finished_before=cutoff, limit=1000):
            swept += batch
        assert swept >= 3
        assert await _counts(app, tenant) == TenantCounts(running=0, started=0)

    async def test_a_self_fanning_workflow_is_stopped_by_its_tenants_caps(
        self, app_factory: AppFactory
    ) -> None:
        limits = Limits(running_per_tenant=FORK_RUNNING, started_per_tenant=FORK_STARTED)
        app = await app_factory(ManualClock(), limits=limits)
        tenant = f"forks-{fresh_id()}"
        ran: set[str] = set()
        seen_running: list[int] = []

        @app.step
        async def observe() -> int:
            # What the store counts while this body runs (itself included).
            running = (await _counts(app, tenant)).running
            seen_running.append(running)
            return running

        @app.workflow(name=f"fork-{fresh_id()}")
        async def bomb(ctx: Context) -> int:
            ran.add(ctx.id)
            await observe()
            # Each run waits for two more of itself: without a cap, without end.
            await ctx.gather(ctx.child(bomb), ctx.child(bomb))
            return 0

        root = await bomb.start(tenant=tenant)
        await app.run_until_idle()
        assert FORK_RUNNING < len(ran) <= FORK_STARTED
        assert max(seen_running) <= FORK_RUNNING
        with pytest.raises(WorkflowFailedError):
            await root.result(timeout=5)
        counts = await _counts(app, tenant)
        assert counts == TenantCounts(running=0, started=len(ran))  # all ended, all kept


__all__ = ["AppAdmission"]
