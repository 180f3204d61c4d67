"""`AppTenants`: tenants scope workflows; a workflow id is unique within its tenant."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from durably.app import App, Context, Workflow, context
from durably.errors import (
    InvalidInputError,
    WorkflowConflictError,
    WorkflowNotFoundError,
)
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import NOTE, AppFixtures, fresh_id, parent_of_a_sleeper


def _charging(app: App, ledger: list[tuple[str, str, int]]) -> tuple[Workflow[Any, Any], ...]:
    """A ``checkout`` workflow whose child ``charge`` writes each charge to ``ledger`` as
    (tenant, workflow id, cents): the effect counted from outside durably's records."""

    @app.step
    async def pay(cents: int) -> int:
        step = context()
        ledger.append((step.tenant, step.workflow, cents))
        return cents

    @app.workflow
    async def charge(ctx: Context, cents: int) -> int:
        return await pay(cents)

    @app.workflow
    async def checkout(ctx: Context, cents: int) -> str:
        charged = await ctx.child(charge, cents)
        return f"{ctx.tenant}:{ctx.id}:{charged}"

    return charge, checkout


class AppTenants(AppFixtures):
    """Tenants scope workflows as namespaces do: ids, handles and children stay in theirs."""

    async def test_the_same_id_under_two_tenants_names_two_workflows(self, app: App) -> None:
        ledger: list[tuple[str, str, int]] = []
        _, checkout = _charging(app, ledger)
        order = fresh_id()
        acme = await checkout.start(4999, id=order, tenant="acme")
        globex = await checkout.start(1, id=order, tenant="globex")
        assert (acme.created, globex.created) == (True, True)
        assert (acme.id, acme.tenant, globex.id, globex.tenant) == (
            order,
            "acme",
            order,
            "globex",
        )
        again = await checkout.start(7, id=order, tenant="acme")  # idempotent in its tenant
        assert not again.created
        await app.run_until_idle()
        assert await acme.result(timeout=5) == f"acme:{order}:4999"
        assert await globex.result(timeout=5) == f"globex:{order}:1"
        assert sorted(cents for _, _, cents in ledger) == [1, 4999]
        info = await (await app.get_handle(order, tenant="globex")).status()
        assert (info.workflow, info.tenant, info.status) == (
            order,
            "globex",
            WorkflowStatus.COMPLETED,
        )
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(order)  # nor in the App's own tenant

    async def test_a_handle_of_another_tenant_never_reaches_the_workflow(self, app: App) -> None:
        @app.workflow
        async def listens(ctx: Context) -> str | None:
            await ctx.set_event("stage", "listening")
            return await ctx.recv(NOTE)

        workflow = fresh_id()
        acme = await listens.start(id=workflow, tenant="acme")
        await app.run_until_idle(advance=False)
        with pytest.raises(WorkflowNotFoundError, match="globex"):
            await app.get_handle(workflow, tenant="globex")
        with pytest.raises(WorkflowNotFoundError):
            await listens.get_handle(workflow, tenant="globex")
        stranger = listens.handle(workflow, "globex")  # made without a look
        with pytest.raises(WorkflowNotFoundError):
            await stranger.send(NOTE, "from globex")
        with pytest.raises(WorkflowNotFoundError):
            await stranger.get_event("stage")
        with pytest.raises(WorkflowNotFoundError):
            await stranger.cancel()
        with pytest.raises(WorkflowNotFoundError):
            await stranger.resume()
        with pytest.raises(WorkflowNotFoundError):
            await stranger.status()
        with pytest.raises(WorkflowNotFoundError):
            await stranger.result(timeout=1)
        # acme's workflow saw none of it: still waiting, its message its own.
        assert (await acme.status()).status is WorkflowStatus.BLOCKED
        assert await acme.get_event("stage") == "listening"
        await acme.send(NOTE, "from acme")
        await app.run_until_idle()
        assert await acme.result(timeout=5) == "from acme"

    async def test_a_child_id_another_tenant_uses_is_not_adopted(self, app: App) -> None:
        ledger: list[tuple[str, str, int]] = []
        charge, checkout = _charging(app, ledger)
        order = fresh_id()
        # globex runs its order first: its child takes the id acme's child derives.
        globex = await checkout.start(1, id=order, tenant="globex")
        await app.run_until_idle()
        acme = await checkout.start(4999, id=order, tenant="acme")
        await app.run_until_idle()
        assert await globex.result(timeout=5) == f"globex:{order}:1"
        assert await acme.result(timeout=5) == f"acme:{order}:4999"
        child = f"{order}/child:{charge.kind}#1"
        assert sorted(ledger) == [("acme", child, 4999), ("globex", child, 1)]
        for tenant in ("acme", "globex"):
            info = await (await charge.get_handle(child, tenant=tenant)).status()
            assert (info.tenant, info.parent) == (tenant, order)

    async def test_a_child_id_held_by_a_workflow_not_its_child_is_not_adopted(
        self, app: App
    ) -> None:
        ledger: list[tuple[str, str, int]] = []
        charge, checkout = _charging(app, ledger)
        order = fresh_id()
        child = f"{order}/child:{charge.kind}#1"
        # A workflow at the child's derived id that names no such parent, written as a
        # release that took any id from users could have left it.
        checkpointer = (await app.stores()).checkpointer
        injected = {
            "kind": charge.kind,
            "args": {"cents": 1},
            "tenant": "default",
            "created": 0.0,
            "parent": None,
            "parent_kind": None,
            "timeout_at": None,
        }
        await checkpointer.supply(child, "durably:start", injected)
        handle = await checkout.start(4999, id=order)
        await app.run_until_idle()
        assert await handle.result(timeout=5) == f"default:{order}:4999"
        # The parent got a child of its own; the injected one never ran.
        assert ledger == [("default", f"{child}~2", 4999)]
        own = await charge.get_handle(f"{child}~2")
        assert (await own.status()).parent == order

    async def test_a_child_with_an_explicit_id_held_by_another_workflow_is_refused(
        self, app: App
    ) -> None:
        @app.workflow
        async def task(ctx: Context, n: int) -> int:
            return n

        @app.workflow
        async def parent(ctx: Context, job: str) -> str:
            try:
                value: int = await ctx.child(task, 2, id=job)
            except WorkflowConflictError as exc:
                return f"refused: {exc}"
            return str(value)

        job = fresh_id()
        await task.start(1, id=job)  # the same tenant's, started from outside
        handle = await parent.start(job)
        await app.run_until_idle()
        assert "not a child of workflow" in await handle.result(timeout=5)
        assert await (await task.get_handle(job)).result(timeout=5) == 1

    async def test_ids_of_the_derived_and_reserved_forms_are_refused_from_users(
        self, app: App
    ) -> None:
        @app.workflow
        async def anything(ctx: Context) -> None:
            return None

        parent = fresh_id()
        for workflow in (
            f"{parent}/child:{anything.kind}#1",
            f"{parent}/start:{anything.kind}#3",
            f"{parent}/child:{anything.kind}#1~2",
            "durably:t4:acme:x",
            "durably:tenancy",
        ):
            with pytest.raises(InvalidInputError):
                await anything.start(id=workflow)
            with pytest.raises(InvalidInputError):
                await anything.start(id=workflow, tenant="acme")
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(f"{parent}/child:{anything.kind}#1")  # nothing was stored
        # A tenant and an id that do not fit in one key together are refused too.
        long = parent + "x" * (500 - len(parent))  # fresh: the store may outlive the test
        with pytest.raises(InvalidInputError, match="too long"):
            await anything.start(id=long, tenant="acme")
        with pytest.raises(InvalidInputError, match="too long"):
            await app.get_handle(long, tenant="acme")
        assert (await anything.start(id=long)).created  # the default tenant's fits

    async def test_cancelling_a_parent_cancels_only_its_own_children(self, app: App) -> None:
        slow, parent = parent_of_a_sleeper(app)
        order = fresh_id()
        acme = await parent.start(id=order, tenant="acme")
        globex = await parent.start(id=order, tenant="globex")
        await app.run_until_idle(advance=False)
        child = f"{order}/child:{slow.kind}#1"
        assert await acme.cancel()
        await app.run_until_idle(advance=False)
        acme_child = await slow.get_handle(child, tenant="acme")
        globex_child = await slow.get_handle(child, tenant="globex")
        assert (await acme_child.status()).status is WorkflowStatus.CANCELLED
        assert (await globex_child.status()).status is WorkflowStatus.SLEEPING
        assert (await globex.status()).status is WorkflowStatus.BLOCKED

    async def test_a_cancel_skips_a_workflow_that_took_a_swept_childs_id(self, app: App) -> None:
        @app.workflow
        async def job(ctx: Context, n: int) -> int:
            if n:
                await ctx.sleep(timedelta(days=1))
            return n

        @app.workflow
        async def parent(ctx: Context, job_id: str) -> str | None:
            await ctx.child(job, 0, id=job_id)
            return await ctx.recv(NOTE)

        job_id = fresh_id()
        handle = await parent.start(job_id)
        await app.run_until_idle(advance=False)
        assert (await handle.status()).status is WorkflowStatus.BLOCKED
        assert await (await job.get_handle(job_id)).result(timeout=5) == 0
        # The child's records go, as the retention sweep removes them; another workflow
        # of the tenant takes its id.
        await (await app.stores()).checkpointer.discard(job_id)
        unrelated = await job.start(1, id=job_id)
        await app.run_until_idle(advance=False)
        assert await handle.cancel()
        await app.run_until_idle(advance=False)
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
        assert (await unrelated.status()).status is WorkflowStatus.SLEEPING

    async def test_children_and_started_workflows_inherit_the_tenant(self, app: App) -> None:
        seen: list[tuple[str, str]] = []

        @app.step
        async def note() -> None:
            step = context()
            seen.append((step.kind.rsplit(".", 1)[-1], step.tenant))

        @app.workflow
        async def leaf(ctx: Context) -> str:
            await note()
            return ctx.tenant

        @app.workflow
        async def root(ctx: Context) -> list[str]:
            waited = await ctx.child(leaf)
            fanned = await ctx.start_child(leaf)
            started = await leaf.start()
            return [waited, fanned.tenant, started.tenant]

        handle = await root.start(tenant="acme")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == ["acme", "acme", "acme"]
        assert seen == [("leaf", "acme")] * 3

    async def test_a_lookup_inside_a_workflow_stays_in_its_tenant(self, app: App) -> None:
        @app.workflow
        async def inbox(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        @app.step
        async def whose(workflow: str) -> str:
            return (await app.get_handle(workflow)).tenant

        @app.workflow
        async def sender(ctx: Context, workflow: str) -> str:
            await (await app.get_handle(workflow)).send(NOTE, f"from {ctx.tenant}")
            return await whose(workflow)

        shared = fresh_id()
        default = await inbox.start(id=shared)
        acme = await inbox.start(id=shared, tenant="acme")
        handle = await sender.start(shared, tenant="acme")
        await app.run_until_idle(advance=False)
        assert await handle.result(timeout=5) == "acme"
        assert await acme.result(timeout=5) == "from acme"
        assert (await default.status()).status is WorkflowStatus.BLOCKED

    async def test_concurrent_starts_of_one_id_create_one_workflow_per_tenant(
        self, app: App
    ) -> None:
        ledger: list[tuple[str, str, int]] = []
        _, checkout = _charging(app, ledger)
        order = fresh_id()
        tenants = ["acme", "globex"] * 8
        handles = await asyncio.gather(
            *(checkout.start(n, id=order, tenant=tenant) for n, tenant in enumerate(tenants))
        )
        created = sorted(h.tenant for h in handles if h.created)
        assert created == ["acme", "globex"]
        await app.run_until_idle()
        charged = {tenant: cents for tenant, _, cents in ledger}
        assert len(ledger) == 2
        assert sorted(charged) == ["acme", "globex"]
        for handle in handles:  # every handle reads its own tenant's one workflow
            cents = charged[handle.tenant]
            assert await handle.result(timeout=5) == f"{handle.tenant}:{order}:{cents}"
