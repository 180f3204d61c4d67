"""Operating workflows: pages of them by filter, counts, and bulk cancel and resume.

Every call reads the store's catalog (`durably.stores.catalog`): a page reads a bounded
slice of one ordered line whatever the store holds. Its cursor is opaque and bound to the
filter (tenant included) it was made under.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from durably.app import _tenancy as tenancy
from durably.app._cancel_many import Target, cancel_many
from durably.app._catalogue import info_of
from durably.app._core import Core
from durably.app._handles import WorkflowHandle
from durably.app._values import ANY
from durably.errors import ConfigurationError, InvalidInputError
from durably.stores.cancelling import Cancelling
from durably.stores.catalog import Cataloguing, Filter, Listed, Mark, micros, page
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.validation import identifier

MAX_PAGE = 1000
"""The most workflows one `App.list_workflows` page, or one bulk call, takes."""

BULK_IN_FLIGHT = 8
"""How many of a page's workflows one bulk call resumes (or, on a store without a batched
cancel, cancels) at once: fewer than a store's default pool holds, so workers serving
beside it keep connections."""

_RESUMABLE = (WorkflowStatus.PARKED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class WorkflowPage:
    """A page of workflows, newest first, and the cursor of the next page.

    ``next_after`` is None when nothing further matches; otherwise pass it as ``after=``
    with the same filter. A page may hold fewer workflows than asked (even none) and still
    have a next one: a page reads a bounded stretch of the store.
    """

    workflows: list[WorkflowInfo]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class WorkflowCounts:
    """How many workflows there are in each status, and of each kind in each status."""

    by_status: dict[WorkflowStatus, int] = field(default_factory=dict)
    by_kind: dict[str, dict[WorkflowStatus, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Every workflow counted."""
        return sum(self.by_status.values())


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What one bulk call changed.

    The workflows it cancelled or resumed (as they were before), how many it looked at,
    and the cursor to go on from (None: done).
    """

    changed: list[WorkflowInfo]
    examined: int
    next_after: str | None


@dataclass(frozen=True, slots=True)
class Query:
    """A checked filter: what the catalog reads, and the digest its cursors carry."""

    selection: Filter
    digest: str
    kind_named: str | None


def query(
    default_tenant: str,
    *,
    kind: object,
    status: object,
    tenant: object,
    created_after: object,
    created_before: object,
    parent: object,
) -> Query:
    """The filter of a listing or bulk call, checked before any I/O.

    `InvalidInputError` naming the argument that is wrong.
    """
    checked_kind = None if kind is None else identifier(kind, "kind")
    checked_status = _status(status)
    owner = None if tenant is None else identifier(tenant, "tenant")
    since = _instant(created_after, "created_after")
    until = _instant(created_before, "created_before")
    if since is not None and until is not None and since > until:
        raise InvalidInputError(
            f"created_after ({created_after}) is after created_before ({created_before})"
        )
    parent_key = None
    if parent is not None:
        parent_id = tenancy.looked_up(identifier(parent, "parent"))
        parent_key = tenancy.workflow_key(owner or default_tenant, parent_id)
    selection = Filter(
        tenant=owner,
        kind=checked_kind,
        status=checked_status,
        parent=parent_key,
        since_us=since or 0,
        until_us=until,
    )
    shape = [owner, checked_kind, checked_status, parent_key, since, until]
    digest = hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]
    return Query(selection, digest, checked_kind)


def _status(status: object) -> WorkflowStatus | None:
    if status is None or isinstance(status, WorkflowStatus):
        return status
    if isinstance(status, str):
        try:
            return WorkflowStatus(status)
        except ValueError:
            pass
    known = ", ".join(s.value for s in WorkflowStatus)
    raise InvalidInputError(f"status must be one of {known}, got {status!r}")


def _instant(moment: object, name: str) -> int | None:
    if moment is None:
        return None
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise InvalidInputError(f"{name} must be a timezone-aware datetime, got {moment!r}")
    return max(0, micros(moment))


def limit_of(limit: object) -> int:
    """``limit`` if it sizes a page (1 to `MAX_PAGE`)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit must be an int from 1 to {MAX_PAGE}, got {limit!r}")
    return limit


def cursor(checked: Query, mark: Mark | None) -> str | None:
    """The opaque cursor of ``mark`` under ``checked``'s filter."""
    if mark is None:
        return None
    text = json.dumps([checked.digest, mark[0], mark[1]], ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def mark_of(checked: Query, after: object) -> Mark | None:
    """The place cursor ``after`` names.

    `InvalidInputError` naming ``after`` for one that is not a cursor, or one made under
    another filter or tenant.
    """
    if after is None:
        return None
    if not isinstance(after, str) or len(after) > 4096:
        raise InvalidInputError("after must be a cursor a page returned (next_after)")
    try:
        raw = base64.urlsafe_b64decode(after + "=" * (-len(after) % 4))
        digest, created, key = json.loads(raw.decode())
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise InvalidInputError("after is not a cursor a page returned (next_after)") from None
    if digest != checked.digest:
        raise InvalidInputError(
            "after is a cursor of another filter or tenant: pass the same filter it was "
            "returned with"
        )
    if isinstance(created, bool) or not isinstance(created, int) or not isinstance(key, str):
        raise InvalidInputError("after is not a cursor a page returned (next_after)")
    return (created, key)


async def store_of(core: Core) -> Cataloguing:
    """The App's checkpointer as a catalog (`ConfigurationError` for one that keeps none)."""
    checkpointer = (await core.stores()).checkpointer
    if not isinstance(checkpointer, Cataloguing):
        raise ConfigurationError(
            f"{type(checkpointer).__name__} keeps no workflow catalog: listing needs one"
        )
    return checkpointer


async def list_page(core: Core, checked: Query, *, limit: int, after: object) -> WorkflowPage:
    """A page of the workflows ``checked`` selects (see `App.list_workflows`)."""
    mark = mark_of(checked, after)
    store = await store_of(core)
    await _known_kind(core, store, checked)
    found = await page(store, checked.selection, limit=limit, after=mark)
    return WorkflowPage([info_of(row) for row in found.rows], cursor(checked, found.next))


async def _known_kind(core: Core, store: Cataloguing, checked: Query) -> None:
    """Refuse a kind neither registered here nor in the store's counts."""
    kind = checked.kind_named
    if kind is None or kind in core.workflows:
        return
    if any(k == kind for k, _ in await store.tally(None)):
        return
    raise InvalidInputError(
        f"kind {kind!r} is unknown: no workflow of it is registered in this App or stored"
    )


async def counts(core: Core, tenant: object) -> WorkflowCounts:
    """The counts by status and by kind (see `App.workflow_counts`)."""
    owner = None if tenant is None else identifier(tenant, "tenant")
    store = await store_of(core)
    tally = await store.tally(owner)
    by_status: dict[WorkflowStatus, int] = {}
    by_kind: dict[str, dict[WorkflowStatus, int]] = {}
    for (kind, status), count in tally.items():
        by_status[status] = by_status.get(status, 0) + count
        by_kind.setdefault(kind, {})[status] = count
    return WorkflowCounts(by_status, by_kind)


async def bulk(core: Core, checked: Query, *, limit: int, after: object, action: str) -> BulkResult:
    """Cancel or resume (``action``) the workflows of one page of ``checked``."""
    mark = mark_of(checked, after)
    store = await store_of(core)
    await _known_kind(core, store, checked)
    found = await page(store, checked.selection, limit=limit, after=mark)
    if mark is None and not found.rows and found.next is None:
        raise InvalidInputError(f"no workflow matches the filter: nothing to {action}")
    next_after = cursor(checked, found.next)
    if action == "cancel" and isinstance(store, Cancelling):
        # A page of cancels in a few store calls (`durably.app._cancel_many`).
        rows = [row for row in found.rows if not row.status.finished]
        targets = [Target(row.workflow, row.entry.tenant) for row in rows]
        firsts = await cancel_many(core, store, targets)
        changed = [info_of(row) for row, first in zip(rows, firsts, strict=True) if first]
        return BulkResult(changed, len(found.rows), next_after)
    gate = asyncio.Semaphore(BULK_IN_FLIGHT)

    async def change(row: Listed) -> WorkflowInfo | None:
        info = info_of(row)
        handle: WorkflowHandle[Any] = WorkflowHandle(
            core, row.workflow, info.workflow, row.entry.tenant, row.entry.kind, ANY, False
        )
        async with gate:
            if action == "cancel":
                done = not info.status.finished and await handle._cancel()
            else:
                done = info.status in _RESUMABLE and await core.resume(row.workflow, row.entry.kind)
        return info if done else None

    # Side by side, a few at a time: each is its workflow's own cancel or resume (of two on
    # one workflow, as of a parent's cascade and its child's own, one changes it). The
    # first failure stops the rest and is raised as one call would raise it.
    try:
        async with asyncio.TaskGroup() as group:
            changes = [group.create_task(change(row)) for row in found.rows]
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None
    changed = [info for task in changes if (info := task.result()) is not None]
    return BulkResult(changed, len(found.rows), next_after)


__all__ = [
    "MAX_PAGE",
    "BulkResult",
    "Query",
    "WorkflowCounts",
    "WorkflowPage",
    "bulk",
    "counts",
    "cursor",
    "limit_of",
    "list_page",
    "mark_of",
    "query",
    "store_of",
]
