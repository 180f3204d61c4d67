"""The App's operations API: list, count, and cancel or resume in bulk (a base of `App`)."""

from __future__ import annotations

from datetime import datetime

from durably.app import _operations as ops
from durably.app._core import Core
from durably.stores.status import WorkflowStatus


class Operating:
    """What an operator calls on an `App`; its methods cross tenants only when asked."""

    _core: Core

    async def list_workflows(
        self,
        *,
        kind: str | None = None,
        status: WorkflowStatus | str | None = None,
        tenant: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        parent: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> ops.WorkflowPage:
        """Return a page of workflows, newest first, in bounded time at any store size.

        Each page reads a bounded stretch of one index the store keeps with its writes
        (never the whole store): a filter no single index answers (a tenant, a kind and
        a status together, say) may return a short page, even an empty one, with a
        cursor to go on from.

        Args:
            kind: Only workflows of this kind.
            status: Only workflows in this status (a `WorkflowStatus` or its value).
            tenant: Only this tenant's workflows. Default: every tenant's (the operations
                API crosses tenants only where a call leaves this out).
            created_after: Only workflows created at or after this aware datetime.
            created_before: Only workflows created before this aware datetime.
            parent: Only the children of this workflow id (of ``tenant``, else of this
                App's tenant).
            limit: The most workflows on the page, 1 to 1000.
            after: The ``next_after`` of the previous page, with the same filter.

        Returns:
            A `WorkflowPage`: `WorkflowInfo`s (id, tenant, kind, created, parent, status)
            and the cursor of the next page (None when nothing further matches).

        Raises:
            InvalidInputError: An unknown status or kind, a naive datetime,
                ``created_after`` after ``created_before``, a bad limit, or a cursor that
                is not one or was made under another filter or tenant (before any write).
            ConfigurationError: A store that keeps no workflow catalog.
        """
        checked = ops.query(
            self._core.tenant,
            kind=kind,
            status=status,
            tenant=tenant,
            created_after=created_after,
            created_before=created_before,
            parent=parent,
        )
        return await ops.list_page(self._core, checked, limit=ops.limit_of(limit), after=after)

    async def workflow_counts(self, *, tenant: str | None = None) -> ops.WorkflowCounts:
        """Return how many workflows there are in each status, and of each kind.

        Exact on every backing, read from counts the store keeps with each write (a few
        rows, not the workflows).

        Args:
            tenant: Only this tenant's workflows. Default: every tenant's.

        Raises:
            InvalidInputError: A bad tenant (before any I/O).
        """
        return await ops.counts(self._core, tenant)

    async def cancel_workflows(
        self,
        *,
        kind: str | None = None,
        status: WorkflowStatus | str | None = None,
        tenant: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        parent: str | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> ops.BulkResult:
        """Cancel one page of the workflows the filter selects (as `WorkflowHandle.cancel`).

        Bounded per call: it looks at one page (as `list_workflows` reads it) and cancels
        the unfinished ones; call again with ``after=result.next_after`` until that is
        None. Safe to repeat: a workflow already cancelled or finished is left alone.

        Args:
            kind: Only workflows of this kind (as `list_workflows`).
            status: Only workflows in this status.
            tenant: Only this tenant's workflows. Default: every tenant's.
            created_after: Only workflows created at or after this aware datetime.
            created_before: Only workflows created before this aware datetime.
            parent: Only the children of this workflow id.
            limit: The most workflows one call looks at, 1 to 1000.
            after: The ``next_after`` of the previous call, with the same filter.

        Returns:
            A `BulkResult`: the workflows this call cancelled, how many it looked at and
            the cursor to go on from.

        Raises:
            InvalidInputError: What `list_workflows` refuses, or (on a first call) a
                filter that matches no workflow; nothing is changed then.
        """
        checked = ops.query(
            self._core.tenant,
            kind=kind,
            status=status,
            tenant=tenant,
            created_after=created_after,
            created_before=created_before,
            parent=parent,
        )
        return await ops.bulk(
            self._core, checked, limit=ops.limit_of(limit), after=after, action="cancel"
        )

    async def resume_workflows(
        self,
        *,
        kind: str | None = None,
        status: WorkflowStatus | str | None = None,
        tenant: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        parent: str | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> ops.BulkResult:
        """Resume one page of the workflows the filter selects (as `WorkflowHandle.resume`).

        Only parked, failed and cancelled workflows are resumed, on the code deployed now;
        bounded per call and safe to repeat, as `cancel_workflows`.

        Args:
            kind: Only workflows of this kind (as `list_workflows`).
            status: Only workflows in this status.
            tenant: Only this tenant's workflows. Default: every tenant's.
            created_after: Only workflows created at or after this aware datetime.
            created_before: Only workflows created before this aware datetime.
            parent: Only the children of this workflow id.
            limit: The most workflows one call looks at, 1 to 1000.
            after: The ``next_after`` of the previous call, with the same filter.

        Returns:
            A `BulkResult`: the workflows this call resumed (as they were before).

        Raises:
            InvalidInputError: As `cancel_workflows`.
        """
        checked = ops.query(
            self._core.tenant,
            kind=kind,
            status=status,
            tenant=tenant,
            created_after=created_after,
            created_before=created_before,
            parent=parent,
        )
        return await ops.bulk(
            self._core, checked, limit=ops.limit_of(limit), after=after, action="resume"
        )


__all__ = ["Operating"]
