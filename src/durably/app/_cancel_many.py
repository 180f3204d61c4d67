"""Cancelling a page of workflows in a few store calls (what `App.cancel_workflows` does).

Each workflow is cancelled as `WorkflowHandle.cancel` cancels one: a marker of its own
generation, a workflow no pass runs (pending, queued in its gate's line, parked) ended
cancelled at once, its parent woken by that end, its children cancelled with it. A page
takes one read of what the cancels need of every workflow's records
(`Cancelling.look_many`), one write of every marker and end (`Cancelling.cancel_many`),
then, per kind, one write dropping the ended ones' wakeups and one waking the rest (a
running pass sees its marker at its next step). The children follow as a page of their
own, whatever their number.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durably.app import _layout as layout
from durably.app import _tenancy as tenancy
from durably.app._core import Core
from durably.app._slots import release_slot
from durably.stores.cancelling import MAX_CANCEL_BATCH, CancelAsk, Cancelling
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import MAX_READY_BATCH, Ready, ReadyingMany, Scheduler

_PREFIXES = (layout.RESUME_PREFIX, layout.CHILD)
"""What a cancel reads of a workflow's records besides its start record: the resume
markers (their count is its generation) and its children."""


@dataclass(frozen=True, slots=True)
class Target:
    """A workflow to cancel: its key, its tenant, and the parent its start names.

    ``parent`` (a child of a cascade) is the id of the parent its start record must name,
    so a workflow that took a swept child's id since is not touched.
    """

    key: str
    tenant: str
    parent: str | None = None


@dataclass(slots=True)
class _Wakeups:
    """The scheduler writes a page's cancels leave, by kind: wakeups dropped and made."""

    dropped: dict[str, list[str]]
    ready: dict[str, list[Ready]]

    def drop(self, kind: str, key: str) -> None:
        self.dropped.setdefault(kind, []).append(key)

    def wake(self, kind: str, entry: Ready) -> None:
        self.ready.setdefault(kind, []).append(entry)


async def cancel_many(core: Core, store: Cancelling, targets: Sequence[Target]) -> list[bool]:
    """Cancel each of ``targets``, and their children.

    Per target, whether this call changed it (its cancel marker landed): False for one
    finished, gone, or cancelled already.
    """
    changed: list[bool] = []
    children: list[Target] = []
    for first in range(0, len(targets), MAX_CANCEL_BATCH):
        page = targets[first : first + MAX_CANCEL_BATCH]
        changed += await _cancel_page(core, store, page, children)
    if children:
        await cancel_many(core, store, children)
    return changed


async def _cancel_page(
    core: Core, store: Cancelling, page: Sequence[Target], children: list[Target]
) -> list[bool]:
    """Cancel the workflows of ``page`` (at most `MAX_CANCEL_BATCH`).

    The children of those still unfinished are added to ``children``.
    """
    looked = await store.look_many([target.key for target in page], [layout.START], _PREFIXES)
    asks: list[CancelAsk] = []
    kept: list[tuple[int, Target, Mapping[str, Any], int]] = []
    named: set[str] = set()
    for index, (target, seen) in enumerate(zip(page, looked, strict=True)):
        if target.key in named:
            continue  # named twice (a child of two cascades): cancelled once
        named.add(target.key)
        start = seen.records.get(layout.START)
        if not isinstance(start, dict) or not tenancy.belongs(seen.records, target.tenant):
            continue  # gone (swept), or not a workflow of this tenant
        if target.parent is not None and start.get("parent") != target.parent:
            continue
        if seen.info is not None and seen.info.status.finished:
            continue
        generation = layout.generation(seen.records)
        asks.append(
            CancelAsk(
                target.key,
                marker=layout.cancel_key(generation),
                value=uuid.uuid4().hex,
                ended=layout.occurrence(layout.CANCELLED, generation),
                superseded=layout.occurrence(layout.RESUMES, generation + 1),
            )
        )
        kept.append((index, target, seen.records, generation))
    changed = [False] * len(page)
    if not asks:
        return changed
    outcomes = await store.cancel_many(asks)
    wakeups = _Wakeups({}, {})
    for (index, target, records, generation), ask, outcome in zip(
        kept, asks, outcomes, strict=True
    ):
        core.cancels.asked(target.key, ask.marker)
        status = outcome.status
        if status is not None and status.finished:
            continue  # finished between the read and the write: left alone
        changed[index] = outcome.first
        start = records[layout.START]
        kind = str(start.get("kind"))
        if outcome.ended:
            await _ended(core, target.key, start, status, wakeups)
        else:
            if outcome.held and status in (WorkflowStatus.PARKED, WorkflowStatus.QUEUED):
                # Its claim is held only while a worker reads its status: the end waits
                # for it, as one cancel's does.
                await core.end_cancelled(target.key, generation, seen=status)
            if status is not WorkflowStatus.QUEUED:  # a queued one is handed to no worker
                entry = Ready(target.key, target.tenant, layout.start_priority(start))
                wakeups.wake(kind, entry)
        _, id = tenancy.scope(target.key, start)
        children += [Target(key, target.tenant, id) for key in layout.children(records)]
    await _schedule(core, wakeups)
    return changed


async def _ended(
    core: Core,
    key: str,
    start: Mapping[str, Any],
    status: WorkflowStatus | None,
    wakeups: _Wakeups,
) -> None:
    """What follows a workflow's end the store wrote.

    Its wakeup dropped (a parked one has none), its debounce slot freed, its parent woken.
    """
    if status is not WorkflowStatus.PARKED:
        wakeups.drop(str(start.get("kind")), key)
    await release_slot((await core.stores()).queue, key, start)
    parent, parent_kind = layout.parent_key(start), start.get("parent_kind")
    if parent is not None and parent_kind is not None:
        priority = layout.start_priority(start, "parent_priority")
        wakeups.wake(str(parent_kind), Ready(parent, start.get("tenant"), priority))


async def _schedule(core: Core, wakeups: _Wakeups) -> None:
    """The scheduler writes of a page: per kind, the wakeups dropped, then those made."""
    for kind, keys in wakeups.dropped.items():
        scheduler = core.durable(kind).scheduler
        for first in range(0, len(keys), MAX_READY_BATCH):
            await _drop(scheduler, keys[first : first + MAX_READY_BATCH])
    for kind, entries in wakeups.ready.items():
        scheduler = core.durable(kind).scheduler
        for first in range(0, len(entries), MAX_READY_BATCH):
            await _wake(scheduler, entries[first : first + MAX_READY_BATCH])


async def _drop(scheduler: Scheduler, keys: list[str]) -> None:
    if isinstance(scheduler, ReadyingMany):
        await scheduler.cancel_many(keys)
        return
    for key in keys:
        await scheduler.cancel(key)


async def _wake(scheduler: Scheduler, entries: list[Ready]) -> None:
    if isinstance(scheduler, ReadyingMany):
        await scheduler.make_ready_many(entries)
        return
    for entry in entries:
        await scheduler.make_ready(entry.workflow, tenant=entry.tenant, priority=entry.priority)


__all__ = ["Target", "cancel_many"]
