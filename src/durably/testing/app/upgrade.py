"""`AppUpgrade`: workflows a store kept from releases before tenants scoped workflow ids
(every workflow under its bare id, its tenant only in its start record) keep their tenant:
found, run, resumed and cancelled in it, and in no other."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durably.app import Context, context
from durably.clock import ManualClock
from durably.errors import (
    ChildWorkflowFailedError,
    WorkflowConflictError,
    WorkflowNotFoundError,
)
from durably.stores.opening import Stores
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFactory, AppFixtures, earlier_start, fresh_id

START = "durably:start"
"""Where a start record lives in a workflow's records (the same before and after)."""
MARKER = "durably:tenancy"
"""The record a store that never held the earlier layout gets when first opened."""


class AppUpgrade(AppFixtures):
    """A store written by an earlier release, opened by this one."""

    async def _earlier_store(self, app_factory: AppFactory) -> Stores:
        if not self.shares_stores:
            pytest.skip("a memory store lives only as long as its App: none predates a release")
        stores = await (await app_factory(ManualClock())).stores()
        # A store an earlier release wrote has no record saying it holds none of its
        # workflows (this release adds that record to stores it finds empty).
        await stores.checkpointer.discard(MARKER)
        return stores

    @staticmethod
    async def _write(stores: Stores, workflow: str, start: dict[str, Any], **records: Any) -> None:
        """Start ``workflow`` as an earlier App did: its records under its bare id, made
        ready in its kind's scheduler."""
        await stores.checkpointer.supply(workflow, START, start)
        for key, value in records.items():
            await stores.checkpointer.supply(workflow, key, value)
        await stores.durable(start["kind"]).scheduler.make_ready(workflow)

    async def test_an_earlier_workflow_of_a_tenant_keeps_its_tenant_and_its_id(
        self, app_factory: AppFactory
    ) -> None:
        stores = await self._earlier_store(app_factory)
        kind, child_kind = f"invoice-{fresh_id()}", f"charge-{fresh_id()}"
        invoice_id, plain_id = fresh_id(), fresh_id()
        await self._write(stores, invoice_id, earlier_start(kind, {"cents": 4999}, "globex"))
        await self._write(stores, plain_id, earlier_start(kind, {"cents": 5}, "default"))
        app = await app_factory(ManualClock())
        ledger: list[tuple[str, str, int]] = []

        @app.step
        async def pay(cents: int) -> int:
            ledger.append((context().tenant, context().workflow, cents))
            return cents

        @app.workflow(name=child_kind)
        async def charge(ctx: Context, cents: int) -> int:
            return await pay(cents)

        @app.workflow(name=kind)
        async def invoice(ctx: Context, cents: int) -> str:
            charged: int = await ctx.child(charge, cents)
            return f"{ctx.tenant}:{ctx.id}:{charged}"

        # Starting it again in its tenant finds it (the earlier arguments win) ...
        again = await invoice.start(7, id=invoice_id, tenant="globex")
        assert (again.created, again.id, again.tenant) == (False, invoice_id, "globex")
        # ... and no other tenant sees it, nor can take its bare id from it.
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(invoice_id)
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(invoice_id, tenant="acme")
        with pytest.raises(WorkflowConflictError, match="another tenant"):
            await invoice.start(1, id=invoice_id)
        fresh = await invoice.start(3, id=invoice_id, tenant="acme")  # a workflow of its own
        assert fresh.created
        await app.run_until_idle()
        assert await again.result(timeout=5) == f"globex:{invoice_id}:4999"
        assert await fresh.result(timeout=5) == f"acme:{invoice_id}:3"
        plain = await app.get_handle(plain_id)  # the default tenant's, as before
        assert await plain.result(timeout=5) == f"default:{plain_id}:5"
        child_id = f"{invoice_id}/child:{child_kind}#1"
        assert sorted(ledger) == sorted(
            [
                ("globex", child_id, 4999),
                ("acme", child_id, 3),
                ("default", f"{plain_id}/child:{child_kind}#1", 5),
            ]
        )
        info = await (await app.get_handle(invoice_id, tenant="globex")).status()
        assert (info.workflow, info.tenant, info.status) == (
            invoice_id,
            "globex",
            WorkflowStatus.COMPLETED,
        )
        child = await (await charge.get_handle(child_id, tenant="globex")).status()
        assert (child.tenant, child.parent) == ("globex", invoice_id)

    async def test_an_earlier_parent_and_child_are_cancelled_and_resumed_in_their_tenant(
        self, app_factory: AppFactory
    ) -> None:
        stores = await self._earlier_store(app_factory)
        kind, child_kind = f"parent-{fresh_id()}", f"slow-{fresh_id()}"
        parent_id = fresh_id()
        child_id = f"{parent_id}/child:{child_kind}#1"
        await self._write(
            stores,
            parent_id,
            earlier_start(kind, {}, "globex"),
            **{f"durably:child:{child_kind}#1": {"id": child_id, "created": True}},
        )
        await self._write(
            stores,
            child_id,
            earlier_start(child_kind, {}, "globex", parent=parent_id, parent_kind=kind),
        )
        app = await app_factory(ManualClock())

        @app.workflow(name=child_kind)
        async def slow(ctx: Context) -> None:
            await ctx.sleep(timedelta(days=1))

        @app.workflow(name=kind)
        async def parent(ctx: Context) -> str:
            try:
                await ctx.child(slow)
            except ChildWorkflowFailedError as exc:
                return f"{ctx.tenant}: {exc.workflow} ended: {exc.error}"
            return "child done"

        await app.run_until_idle(advance=False)
        handle = await parent.get_handle(parent_id, tenant="globex")
        child = await slow.get_handle(child_id, tenant="globex")
        assert (await handle.status()).status is WorkflowStatus.BLOCKED
        assert (await child.status()).status is WorkflowStatus.SLEEPING
        with pytest.raises(WorkflowNotFoundError):
            await parent.get_handle(parent_id)  # not the default tenant's to cancel
        assert await handle.cancel()
        await app.run_until_idle(advance=False)
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
        assert (await child.status()).status is WorkflowStatus.CANCELLED
        assert await handle.resume()
        await app.run_until_idle(advance=False)
        assert await handle.result(timeout=5) == f"globex: {child_id} ended: cancelled"
