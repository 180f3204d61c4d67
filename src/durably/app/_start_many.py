"""Starting many workflows of one kind in a few store calls (`Workflow.start_many`).

Each workflow is started as `Workflow.start` starts one: its start record admitted and
counted under its tenant, its catalog entry, its run record, its wakeup. A batch takes one
write of every start record (`AdmittingMany.admit_many`), one of every catalog entry and
one of every run record side by side, then one of every wakeup
(`ReadyingMany.make_ready_many`). A kind with a gate or a throttle, an App with tenant
caps, a store written before ids were scoped by tenant, or a store without those calls
start each workflow through `Workflow.start`'s own path, a few at once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durably.app import _layout as layout
from durably.app import _runs as runs
from durably.app import _tenancy as tenancy
from durably.app._begins import Begins
from durably.app._catalogue import entry_of
from durably.app._values import Duration
from durably.errors import InvalidInputError, StatePersistenceError, WorkflowConflictError
from durably.stores.admission import Admit, AdmittingMany
from durably.stores.catalog import Cataloguing
from durably.stores.opening import Stores
from durably.stores.runs import CreatingRuns
from durably.stores.work import BATCH_MOST, WorkPriority
from durably.stores.workflows import Ready, ReadyingMany, Recorded

if TYPE_CHECKING:
    from durably.app._handles import WorkflowHandle
    from durably.app._workflow import Workflow

IN_FLIGHT = 8
"""How many starts run at once where a batch starts them one by one (`Workflow.start`'s
path): fewer than a store's default pool holds, so workers serving beside it keep
connections."""


@dataclass(frozen=True, slots=True)
class _Start:
    """One workflow of a batch: its id, its key, and its start record."""

    id: str
    key: str
    record: dict[str, Any]


def calls_of(
    calls: Iterable[Sequence[Any] | Mapping[str, Any]], ids: Sequence[str | None] | None
) -> list[tuple[tuple[Any, ...], dict[str, Any], str | None]]:
    """Each call's positional and keyword arguments, and its id (None: a fresh one).

    `InvalidInputError` before any I/O: more than `BATCH_MOST` calls, a call that is no
    tuple or mapping, ``ids`` of another length.
    """
    listed = list(calls)
    if len(listed) > BATCH_MOST:
        raise InvalidInputError(f"calls must hold at most {BATCH_MOST:,}, got {len(listed)}")
    named: Sequence[str | None] = [None] * len(listed) if ids is None else ids
    if isinstance(named, str) or len(named) != len(listed):
        raise InvalidInputError("ids must hold one id (or None) per call")
    found = []
    for n, (call, id) in enumerate(zip(listed, named, strict=True)):
        if isinstance(call, Mapping):
            found.append(((), dict(call), id))
        elif isinstance(call, Sequence) and not isinstance(call, str | bytes):
            found.append((tuple(call), {}, id))
        else:
            raise InvalidInputError(
                f"calls[{n}] must be a tuple of arguments or a mapping of keyword "
                f"arguments, got {type(call).__name__}"
            )
    return found


async def start_many(
    workflow: Workflow[Any, Any],
    calls: Iterable[Sequence[Any] | Mapping[str, Any]],
    *,
    ids: Sequence[str | None] | None,
    tenant: str | None,
    timeout: Duration | None,
    delay: Duration | None,
    at: Any,
    priority: WorkPriority | None,
) -> list[WorkflowHandle[Any]]:
    """Start a workflow of ``workflow``'s kind per call (see `Workflow.start_many`)."""
    begins = Begins(delay, at)
    starts: list[_Start] = []
    keys: set[str] = set()
    for args, kwargs, id in calls_of(calls, ids):
        record = workflow.prepare(
            args, kwargs, tenant=tenant, timeout=timeout, begins=begins, priority=priority
        )
        name = tenancy.new_id(id) if id is not None else str(uuid.uuid4())
        key = tenancy.workflow_key(str(record["tenant"]), name)
        if key in keys:
            raise InvalidInputError(f"ids: workflow {name!r} is named twice")
        keys.add(key)
        starts.append(_Start(name, key, record))
    core = workflow._core
    stores = await core.stores()
    if not _batched(workflow, stores):
        return await _one_by_one(workflow, starts)
    core.durable(workflow.kind)  # its scheduler opened before the first write, as a start's
    handles: list[WorkflowHandle[Any]] = []
    for first in range(0, len(starts), BATCH_MOST):
        handles += await _start_batch(workflow, stores, starts[first : first + BATCH_MOST])
    return handles


def _batched(workflow: Workflow[Any, Any], stores: Stores) -> bool:
    """Whether ``workflow``'s starts go out in batches on ``stores``."""
    core = workflow._core
    return (
        workflow.gates.concurrency is None
        and workflow.gates.throttle is None
        and workflow.flow.debounce is None
        and not core.caps.capped
        and not core.older_layout
        and isinstance(stores.checkpointer, AdmittingMany)
        and isinstance(stores.checkpointer, Cataloguing)
        and isinstance(stores.state, CreatingRuns)
    )


async def _one_by_one(
    workflow: Workflow[Any, Any], starts: list[_Start]
) -> list[WorkflowHandle[Any]]:
    """Start each through `Workflow.launch`, a few at once (in order, the handles).

    Every start is made before the first refusal is raised, as a batch makes them.
    """
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def start(begun: _Start) -> WorkflowHandle[Any]:
        async with gate:
            key, created = await workflow.launch(begun.id, begun.record)
        return workflow.handle(begun.id, begun.record["tenant"], created=created, key=key)

    made = await asyncio.gather(*(start(begun) for begun in starts), return_exceptions=True)
    handles: list[WorkflowHandle[Any]] = []
    for outcome in made:
        if isinstance(outcome, BaseException):
            raise outcome
        handles.append(outcome)
    return handles


async def _start_batch(
    workflow: Workflow[Any, Any], stores: Stores, starts: list[_Start]
) -> list[WorkflowHandle[Any]]:
    """Start a batch of at most `BATCH_MOST` workflows (see the module)."""
    core = workflow._core
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, AdmittingMany)
    assert isinstance(checkpointer, Cataloguing)
    for begun in starts:  # noted before the first write: an announcement after is of it
        core.waiters.starting(stores, begun.key)
    admits = [
        Admit(begun.key, layout.START, begun.record, str(begun.record["tenant"]))
        for begun in starts
    ]
    try:
        recorded = await checkpointer.admit_many(admits)
    except (StatePersistenceError, InvalidInputError) as exc:
        if isinstance(exc, StatePersistenceError) and exc.reason != "too_large":
            raise
        raise InvalidInputError(
            f"workflow {workflow.kind!r}: the store refuses its arguments: {exc}"
        ) from None
    # A start whose id exists under another kind (or not as this child) is refused as one
    # start refuses it, once every other start of the batch has been written through.
    refused: WorkflowConflictError | None = None
    started: list[tuple[_Start, Recorded[object]]] = []
    for begun, written in zip(starts, recorded, strict=True):
        try:
            workflow._adoptable(begun.id, written.value, begun.record)
        except WorkflowConflictError as exc:
            refused = refused or exc
            continue
        started.append((begun, written))
    # Every start catalogues (a repeat repairs a start that crashed before it did); the
    # first opens its run record too, before its wakeup. Neither reads what the other
    # writes: both at once.
    entries = [(begun.key, entry_of(_record_of(begun, written))) for begun, written in started]
    writes = [
        checkpointer.catalog_many(entries),
        _open_runs(workflow, stores, [begun for begun, written in started if written.first]),
    ]
    for outcome in await asyncio.gather(*writes, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome
    await _wake(workflow, stores, started)
    handles = []
    for begun, written in started:
        if not written.first:
            core.waiters.unannounced(begun.key)  # an earlier workflow: forgotten
        tenant = begun.record["tenant"]
        handles.append(workflow.handle(begun.id, tenant, created=written.first, key=begun.key))
    if refused is not None:
        raise refused
    return handles


def _record_of(begun: _Start, written: Recorded[object]) -> Mapping[str, Any]:
    """The start record that stands for ``begun``: the first start's.

    A repeated start's own record was not written.
    """
    return written.value if isinstance(written.value, dict) else begun.record


async def _open_runs(workflow: Workflow[Any, Any], stores: Stores, starts: list[_Start]) -> None:
    """The run record of each workflow the batch created, in one write.

    One found there (an earlier workflow's, swept since, or the user's own) is opened as
    a lone start opens it.
    """
    state = stores.state
    assert isinstance(state, CreatingRuns)
    records = [
        runs.opened_run(str(begun.record["tenant"]), begun.id, workflow.kind, begun.key)
        for begun in starts
    ]
    created = await state.create_runs(records) if records else []
    for begun, fresh in zip(starts, created, strict=True):
        if not fresh:
            tenant = str(begun.record["tenant"])
            await runs.open_run(stores.state, tenant, begun.id, workflow.kind, begun.key)


async def _wake(
    workflow: Workflow[Any, Any], stores: Stores, started: list[tuple[_Start, Recorded[object]]]
) -> None:
    """The wakeup of each workflow the batch created, in one write.

    A repeated start wakes one that never reported a status (a start that crashed before
    its wakeup), as a lone start does.
    """
    scheduler = workflow._core.durable(workflow.kind).scheduler
    entries: list[Ready] = []
    for begun, written in started:
        tenant = str(begun.record["tenant"])
        priority = layout.start_priority(_record_of(begun, written))
        if written.first or await stores.checkpointer.get_status(begun.key) is None:
            entries.append(Ready(begun.key, tenant, priority))
    if not entries:
        return
    if isinstance(scheduler, ReadyingMany):
        await scheduler.make_ready_many(entries)
        return
    for entry in entries:
        await scheduler.make_ready(entry.workflow, tenant=entry.tenant, priority=entry.priority)


__all__ = ["IN_FLIGHT", "calls_of", "start_many"]
