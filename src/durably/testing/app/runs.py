"""`AppRuns`: the run record of a workflow, as its `StateStore` holds it, follows the
workflow's status; so do its tenant's run totals.

Every state is read from the store directly (`StateStore.get_run`, `tenant_totals`), never
through the App, which could derive it from the status instead.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from durably.app import App, Context, Retry
from durably.clock import ManualClock
from durably.errors import WorkflowCancelledError
from durably.stores.runs import FOLLOWS, RunRecord, RunState, StateKey
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import NOTE, AppFixtures, fresh_id


async def _stored(app: App, tenant: str, id: str) -> RunRecord:
    found = await (await app.stores()).state.get_run(StateKey(tenant=tenant, id=id))
    assert found is not None, f"no run record of {tenant}/{id}"
    return found


async def _by_state(app: App, tenant: str) -> dict[RunState, int]:
    totals = await (await app.stores()).state.tenant_totals([tenant])
    return {state: n for state, n in totals[0].by_state.items() if n} if totals else {}


class AppRuns(AppFixtures):
    async def test_the_stored_run_record_and_totals_follow_each_status_of_the_workflow(
        self, app: App
    ) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)
        tenant, id = f"t-{fresh_id()}", fresh_id()
        seen: list[tuple[RunState, dict[RunState, int]]] = []

        @app.step(name=f"look-{fresh_id()}")
        async def look() -> None:  # in the middle of a step: what the store says now
            seen.append(((await _stored(app, tenant, id)).state, await _by_state(app, tenant)))

        @app.workflow(name=f"followed-{fresh_id()}")
        async def followed(ctx: Context) -> str:
            await look()
            await ctx.sleep(timedelta(hours=1))
            return str(await ctx.recv(NOTE))

        handle = await followed.start(id=id, tenant=tenant)
        assert (await _stored(app, tenant, id)).state is RunState.PENDING
        assert await _by_state(app, tenant) == {RunState.PENDING: 1}

        await app.run_until_idle(advance=False)
        assert seen == [(RunState.RUNNING, {RunState.RUNNING: 1})]
        assert (await handle.status()).status is WorkflowStatus.SLEEPING
        asleep = await _stored(app, tenant, id)
        assert asleep.state is RunState.SUSPENDED
        assert isinstance(asleep.metadata[FOLLOWS], str)  # the workflow's key
        assert await _by_state(app, tenant) == {RunState.SUSPENDED: 1}

        clock.advance(3600)
        await app.run_until_idle(advance=False)
        assert (await handle.status()).status is WorkflowStatus.BLOCKED
        assert (await _stored(app, tenant, id)).state is RunState.SUSPENDED

        await handle.send(NOTE, "done")
        await app.run_until_idle(advance=False)
        assert await handle.result(timeout=5) == "done"
        done = await _stored(app, tenant, id)
        assert done.state is RunState.COMPLETED
        assert done.version > asleep.version  # each move is a new version
        assert await _by_state(app, tenant) == {RunState.COMPLETED: 1}

    async def test_an_exhausted_retry_leaves_the_stored_run_failed(self, app: App) -> None:
        tenant, id = f"t-{fresh_id()}", fresh_id()

        @app.step(name=f"broken-{fresh_id()}", retry=Retry(max_attempts=1))
        async def broken() -> None:
            raise RuntimeError("always")

        @app.workflow(name=f"failing-{fresh_id()}")
        async def failing(ctx: Context) -> None:
            await broken()

        await failing.start(id=id, tenant=tenant)
        await app.run_until_idle()
        assert (await _stored(app, tenant, id)).state is RunState.FAILED
        assert await _by_state(app, tenant) == {RunState.FAILED: 1}

    async def test_a_cancel_leaves_the_stored_run_cancelled_before_or_after_a_pass(
        self, app: App
    ) -> None:
        tenant = f"t-{fresh_id()}"

        @app.workflow(name=f"waiting-{fresh_id()}")
        async def waiting(ctx: Context) -> str:
            return str(await ctx.recv(NOTE))

        never_run = await waiting.start(id="never-run", tenant=tenant)
        blocked = await waiting.start(id="blocked", tenant=tenant)
        assert await never_run.cancel()  # no pass yet: ended at once
        assert (await _stored(app, tenant, "never-run")).state is RunState.CANCELLED
        await app.run_until_idle(advance=False)
        assert (await _stored(app, tenant, "blocked")).state is RunState.SUSPENDED
        assert await _by_state(app, tenant) == {RunState.CANCELLED: 1, RunState.SUSPENDED: 1}
        assert await blocked.cancel()
        await app.run_until_idle(advance=False)
        with pytest.raises(WorkflowCancelledError):
            await blocked.result(timeout=5)
        assert (await _stored(app, tenant, "blocked")).state is RunState.CANCELLED
        assert await _by_state(app, tenant) == {RunState.CANCELLED: 2}

    async def test_a_status_write_moves_only_its_own_tenants_run_of_that_id(self, app: App) -> None:
        mine, theirs, stranger = (f"{name}-{fresh_id()}" for name in ("a", "b", "c"))
        id = fresh_id()

        @app.workflow(name=f"short-{fresh_id()}")
        async def short(ctx: Context) -> str:
            return str(await ctx.recv(NOTE))

        handle = await short.start(id=id, tenant=mine)
        await short.start(id=id, tenant=theirs)  # the same id in a second tenant
        state = (await app.stores()).state
        # A record of another tenant's own naming the first workflow's key is not its run.
        key = (await _stored(app, mine, id)).metadata[FOLLOWS]
        posed = RunRecord(run_id=id, tenant=stranger, agent_name="mine", metadata={FOLLOWS: key})
        await state.put_run(posed)
        await handle.send(NOTE, "done")
        await app.run_until_idle(advance=False)
        assert (await _stored(app, mine, id)).state is RunState.COMPLETED
        assert (await _stored(app, theirs, id)).state is RunState.SUSPENDED
        assert (await _stored(app, stranger, id)).state is RunState.PENDING
        assert await _by_state(app, stranger) == {RunState.PENDING: 1}
