"""`WorkflowHandle`: a started workflow seen from outside, from any process."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from durably.app import _layout as layout
from durably.app import _runs as runs
from durably.app import _tenancy as tenancy
from durably.app._context import current_tenant, current_workflow
from durably.app._core import Core
from durably.app._forking import MAX_NOTED, fork
from durably.app._history import described
from durably.app._topics import Topic
from durably.app._values import ANY, Duration, Value, decoded_record, seconds_of
from durably.errors import (
    InvalidInputError,
    PoolExhaustedError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowFinishedError,
    WorkflowNotFoundError,
)
from durably.stores.changes import ENDED, RECORDS
from durably.stores.gates import Gating
from durably.stores.runs import RunRecord
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.work import WorkPriority
from durably.stores.workflows import Checkpointer, look_at

R = TypeVar("R")

MARKER_WINDOW = 8
"""Resume generations one read of a workflow's cancel and resume markers covers (`send`
reads those, not the rest): each further window of resumes costs one more read."""


def _deadline(timeout: Duration | None) -> float | None:
    """The loop time ``timeout`` ends at (None: no deadline)."""
    if timeout is None:
        return None
    return asyncio.get_running_loop().time() + seconds_of(timeout, "timeout")


class WorkflowHandle(Generic[R]):
    """A started workflow seen from outside, from any process.

    Given by `Workflow.start`, or found with `App.get_handle` or `Workflow.get_handle`: its
    id, result, status, messages, events, cancel and resume.
    """

    def __init__(
        self,
        core: Core,
        key: str,
        id: str,
        tenant: str,
        kind: str,
        result: Value,
        created: bool,
    ) -> None:
        self._core = core
        self._key = key  # the engine's key (`tenancy.workflow_key`, or an older one)
        self._id = id
        self._tenant = tenant
        self._kind = kind
        self._result = result
        self._created = created

    @property
    def id(self) -> str:
        """The workflow's id (unique within its tenant)."""
        return self._id

    @property
    def tenant(self) -> str:
        """The tenant the workflow belongs to."""
        return self._tenant

    @property
    def kind(self) -> str:
        """The workflow's kind."""
        return self._kind

    @property
    def created(self) -> bool:
        """Whether the call that gave this handle created the workflow.

        False when the id existed already, and for a handle found with ``get_handle``.
        """
        return self._created

    async def result(self, timeout: Duration | None = None) -> R:
        """Wait for the workflow to end and return its result.

        Works from any process, at any later time until the workflow is swept. A parked
        workflow has not ended: it is waited for. A look that finds every pooled
        connection busy (`PoolExhaustedError`) is taken again at the next, not raised.

        Args:
            timeout: How long to wait, in seconds or a timedelta (default: for ever).

        Returns:
            The body's return value, decoded to its annotated type (plain JSON data for a
            kind the App does not register).

        Raises:
            InvalidInputError: Awaited inside a workflow body, where it would hold the pass
                (use `Context.child`), or a ``timeout`` that is not a positive duration.
            WorkflowFailedError: The workflow failed; it carries the failure it recorded
                (``error``, and its ``type``, ``message`` and failing ``step``).
            WorkflowCancelledError: The workflow was cancelled, or (``timed_out``) its
                own timeout passed.
            TimeoutError: ``timeout`` passed before the workflow ended.
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
            IncompatibleRecordError: The recorded result no longer fits its annotated type,
                or the start record is not of the shape an App writes.
            UnreadableRecordError: A record cannot be read at all (corrupt, or written by
                something else; a pass parks the workflow on it): at once when it is the
                result or the start record, else in place of the `TimeoutError`, as it
                says why no result comes.
        """
        if current_workflow() is not None:
            raise InvalidInputError(
                "awaiting handle.result() inside a workflow body would hold the pass; use ctx.child"
            )
        deadline = _deadline(timeout)
        stores = await self._core.stores()
        checkpointer = stores.checkpointer
        # Registered before the first look: a status reported after it wakes this wait.
        waiters = self._core.waiters
        with waiters.watch(stores, self._key, ENDED) as waiter:
            # Started by this process with nothing announced since: it has not ended, and
            # the first look is the announcement's (a start's look costs the store a read).
            looks = not (self._created and waiters.unannounced(self._key))
            while True:
                ended = None
                if looks:
                    try:
                        ended = await self._ended(checkpointer)
                    except PoolExhaustedError:
                        waiter.look_again()  # every connection stayed busy for the pool's wait
                looks = True
                if ended is not None:
                    value: R = ended[0]
                    return value
                if not await waiter.pause(deadline):
                    break
        # Why it may never finish, if its records say so (one that cannot be read).
        layout.read_start(await checkpointer.load(self._key), self._id)
        raise TimeoutError(f"workflow {self._id!r} has not finished")

    async def _ended(self, checkpointer: Checkpointer[Any]) -> tuple[R] | None:
        """Return the decoded result (in a tuple) once the workflow completed, else None.

        Raises as `result` does for a workflow that failed, was cancelled or is not there.
        The reads are shared by every handle of this process waiting on the workflow.
        """
        waiters, key = self._core.waiters, self._key
        info, stored = await waiters.shared(key, "end", lambda: _end_of(checkpointer, key))
        if info is not None:
            if info.status is WorkflowStatus.COMPLETED:
                if layout.RESULT in stored:
                    data = stored[layout.RESULT]
                    return (decoded_record(self._id, layout.RESULT, self._result, data),)
            elif info.status in (WorkflowStatus.FAILED, WorkflowStatus.CANCELLED):
                history = await waiters.shared(
                    key, "history", lambda: layout.readable(checkpointer, key)
                )
                ended = layout.ending(history) or {}
                if info.status is WorkflowStatus.FAILED:
                    details = layout.failure_details(ended)
                    raise WorkflowFailedError(self._id, info.last_error, **details)
                raise WorkflowCancelledError(self._id, timed_out=ended.get("e") == layout.TIMED_OUT)
        elif not tenancy.belongs(stored, self._tenant):
            raise self._not_found()
        return None

    async def status(self) -> WorkflowInfo:
        """Return the workflow's status, with its kind, tenant, created time and parent.

        Before its first pass the status is `WorkflowStatus.PENDING`. Only the start record
        and the status are read: another record that cannot be read does not hide it (a
        pass parks the workflow on such a record, and the status says so).

        Raises:
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
            UnreadableRecordError: The start record or the status cannot be read at all.
            IncompatibleRecordError: The start record is not of the shape an App writes.
        """
        checkpointer = (await self._core.stores()).checkpointer
        # Not its whole history: the start record and the first forks made of it, read
        # with the status.
        notes = [f"{layout.FORK}{n}" for n in range(1, MAX_NOTED + 1)]
        info, stored = await look_at(checkpointer, self._key, [layout.START, *notes])
        return self._described(stored, info)

    async def run_record(self) -> RunRecord:
        """Return the workflow's agent run record.

        Its tokens and cost so far, with the state its status says: pending, running,
        suspended (while it sleeps, waits or is parked), completed, failed or cancelled.

        Raises:
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
        """
        info = await self.status()
        state = (await self._core.stores()).state
        return await runs.run_record(
            state, self._tenant, self._id, str(info.kind), self._key, info.status
        )

    def _not_found(self) -> WorkflowNotFoundError:
        return WorkflowNotFoundError(self._id, tenant=self._tenant)

    async def _look(self) -> tuple[dict[str, object], WorkflowInfo]:
        checkpointer = (await self._core.stores()).checkpointer
        stored = await checkpointer.load(self._key)
        return stored, self._described(stored, await checkpointer.get_status(self._key))

    def _described(self, stored: Mapping[str, object], info: WorkflowInfo | None) -> WorkflowInfo:
        """Return ``info`` with what the start record in ``stored`` says of the workflow.

        Raises:
            WorkflowNotFoundError: No start record, or one of another tenant.
            IncompatibleRecordError: A start record not of the shape an App writes.
        """
        start = layout.read_start(stored, self._id)
        if start is None or not tenancy.belongs(stored, self._tenant):
            raise self._not_found()
        created = datetime.fromtimestamp(start["created"], UTC)
        if info is None:
            info = WorkflowInfo(self._id, WorkflowStatus.PENDING, 0, None, created)
        origin = start.get("forked_from")
        forks = [stored.get(f"{layout.FORK}{n}") for n in range(1, MAX_NOTED + 1)]
        return dataclasses.replace(
            info,
            workflow=self._id,
            kind=start["kind"],
            tenant=self._tenant,
            created=created,
            parent=start.get("parent"),
            forked_from=str(origin["id"]) if isinstance(origin, dict) else None,
            forks=tuple(str(f["id"]) for f in forks if isinstance(f, dict) and "id" in f),
        )

    async def history(self) -> dict[str, Any]:
        """Return the workflow's history: what ``durably workflows show --json`` prints.

        JSON-ready data: its ``tenant``, ``workflow`` id, store ``key``, ``kind``,
        ``status`` (as `status` reports it, before the first pass None), what cannot be
        read of it (``unreadable``, None when everything can), and ``history``: every
        record in recorded order, the start record first, with its ``key``, ``what`` it is
        (``step``, ``retry``, ``child``, ``child end``, ``message``, ``recv``, ``event``,
        ``start``, ``result``, ``failure``, ``cancel``, ``cancelled``, ``resume``,
        ``fork``, ``started`` or ``recorded``), its ``value`` as stored and the time it
        landed (``at``, ISO 8601). A failed step's record holds its error; parks show in
        the status; each resume has its ``resume`` record.

        Raises:
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
        """
        checkpointer = (await self._core.stores()).checkpointer
        found = await described(checkpointer, self._key, self._tenant, self._id)
        if found is None:
            raise self._not_found()
        return found

    async def fork(
        self, from_step: str | None = None, *, id: str | None = None
    ) -> WorkflowHandle[R]:
        """Start a new workflow with these arguments, replaying the records before a step.

        The records the body made before ``from_step`` (in recorded order) are copied, so
        the fork replays them and re-runs ``from_step`` and everything after it on the code
        deployed now; None re-runs the whole body. Messages are not copied: a ``recv``
        before ``from_step`` answers from its record, one after it waits for a new
        message. The fork runs in this workflow's tenant with no parent; its status names
        this workflow (``forked_from``) and this workflow's names the fork (``forks``).

        Args:
            from_step: The key of the first step to re-run (as `history` lists it:
                ``charge#1``, ``durably:child:notify#1``...).
            id: The fork's id. Default: a fresh UUID.

        Returns:
            The fork's handle.

        Raises:
            InvalidInputError: A ``from_step`` the workflow never recorded, or one after a
                child that had not ended by then; a bad ``id``. Nothing is written then.
            WorkflowConflictError: The tenant has a workflow of that ``id``.
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
        """
        await self.status()  # not found, or of another tenant: refused before any write
        fresh, key, kind = await fork(self._core, self._key, self._id, self._tenant, from_step, id)
        return WorkflowHandle(self._core, key, fresh, self._tenant, kind, self._result, True)

    async def send(self, topic: Topic[Any], value: object) -> None:
        """Send ``value`` on ``topic`` to this workflow and make it ready, atomically.

        The workflow receives it with `Context.recv`. Inside a workflow body the send is
        recorded like a step. A message never revives a finished workflow: the status is
        checked in the same atomic write as the append, so a send that returns landed
        before the workflow ended. It costs the same whatever was sent before (only the
        workflow's start record and cancel markers are read).

        Args:
            topic: The topic the workflow receives on.
            value: The message, of the topic's type.

        Raises:
            InvalidInputError: ``topic`` is not a `Topic`, or ``value`` is not a valid
                message of it (before any I/O; the message names the topic).
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
            WorkflowFinishedError: The workflow has finished, or a cancel was asked for it
                that its body has not seen yet.
        """
        if not isinstance(topic, Topic):
            raise InvalidInputError(f"send needs a durably.Topic, got {type(topic).__name__}")
        data = topic.encode(value)
        message = {"topic": topic.name, "value": data}

        async def deliver() -> object:
            priority = await self._accepting()
            # The status is read in the same atomic write as the append: a workflow that
            # finished meanwhile refuses it (`WorkflowFinishedError`), writing nothing.
            entry = await self._core.durable(self._kind).deliver(
                self._key, message, tenant=self._tenant, priority=priority, unless_finished=True
            )
            return entry.key

        ctx = current_workflow()
        if ctx is None:
            await deliver()
        else:  # inside a body: sent once, recorded
            await ctx._outside("send", deliver)

    async def _accepting(self) -> int:
        """Check that the workflow exists and no cancel of it is pending.

        Returns the priority its start record names. Reads only its start record and its
        cancel and resume markers, whatever else it holds.

        Raises:
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
            WorkflowFinishedError: A cancel was asked that no pass has seen yet.
        """
        checkpointer = (await self._core.stores()).checkpointer
        # The priority its last `set_priority` names, read in the same look.
        generation, names = 1, [layout.START, *layout.priority_keys(1)]
        while True:
            # Generation G is opened by resume marker G+1 (`Core.resume`); its cancel
            # marker is `layout.cancel_key(G)`.
            span = range(generation, generation + MARKER_WINDOW)
            names += [layout.cancel_key(g) for g in span]
            names += [layout.occurrence(layout.RESUMES, g + 1) for g in span]
            found = await checkpointer.peek(self._key, names)
            if names[0] == layout.START:
                if not tenancy.belongs(found, self._tenant):
                    raise self._not_found()
                changed = await layout.changed_priority(checkpointer, self._key, found)
                if changed is None:
                    changed = layout.start_priority(found.get(layout.START))
                priority = changed
            while generation in span and layout.occurrence(layout.RESUMES, generation + 1) in found:
                generation += 1
            if generation in span:
                break
            names = []
        if layout.cancel_key(generation) in found:
            # Cancelled, though no pass has ended it yet.
            raise WorkflowFinishedError(
                f"workflow {self._id!r} is being cancelled: it takes no messages"
            )
        return priority

    async def get_event(
        self, key: str, timeout: Duration | None = None, *, type: Any = None
    ) -> Any:
        """Return the latest value the workflow published under event ``key``.

        Args:
            key: The event's key, as given to `Context.set_event`.
            timeout: How long to wait for a first value, in seconds or a timedelta. None:
                do not wait.
            type: The type to decode the value as (default: plain JSON data).

        Returns:
            The latest value; None at once when ``timeout`` is None and there is none yet.

        Raises:
            InvalidInputError: A ``key`` `Context.set_event` would refuse, or a ``timeout``
                that is not a positive duration (before any I/O).
            ConfigurationError: A ``type`` pydantic cannot encode.
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
            TimeoutError: No value was published within ``timeout``.
            IncompatibleRecordError: The published value does not fit ``type``.
        """
        layout.bounded(key, "event key")  # as `Context.set_event` checks it
        value = ANY if type is None else Value.of(type, f"event {key!r}")
        deadline = _deadline(timeout)
        stores = await self._core.stores()
        checkpointer = stores.checkpointer
        event = f"{layout.EVENT}{key}#"
        # Registered before the first look: an event landing after it wakes this wait.
        with self._core.waiters.watch(stores, self._key, RECORDS) as waiter:
            while True:
                stored = await self._core.waiters.shared(
                    self._key,
                    event,
                    lambda: layout.readable(checkpointer, self._key, prefix=event),
                )
                if not tenancy.belongs(stored, self._tenant):
                    raise self._not_found()
                found, data = layout.latest_event(stored, key)
                if found:
                    return decoded_record(self._id, f"event {key!r}", value, data)
                if deadline is None:
                    return None
                if not await waiter.pause(deadline):
                    raise TimeoutError(f"workflow {self._id!r} published no event {key!r}")

    async def cancel(self) -> bool:
        """Ask the workflow to stop; its children are cancelled with it.

        The body sees `asyncio.CancelledError` at its next step, sleep, ``recv`` or child
        (a sleeping or waiting workflow is woken for it; a parked one ends cancelled at
        once). Inside a workflow body the cancel is recorded like a step.

        Returns:
            Whether this call changed anything: False for a finished workflow or one
            already cancelled.

        Raises:
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
        """
        ctx = current_workflow()
        if ctx is not None:  # inside a body: cancelled once, recorded
            # Not "cancel#N": that key is this workflow's own cancel marker.
            return bool(await ctx._outside("asked-cancel", self._cancel))
        return await self._cancel()

    async def _cancel(self) -> bool:
        stored, info = await self._look()
        if info.status.finished:
            return False
        generation = layout.generation(stored)
        # A marker of this call's own: of two cancels, only the one whose marker landed
        # changed anything.
        marker = layout.cancel_key(generation)
        if info.status is WorkflowStatus.QUEUED:
            # Not woken: a queued workflow is handed to no worker (it ends here).
            checkpointer = (await self._core.stores()).checkpointer
            recorded = await checkpointer.supply(self._key, marker, uuid.uuid4().hex)
        else:
            recorded = await self._core.durable(self._kind).arrive(
                self._key,
                marker,
                uuid.uuid4().hex,
                tenant=self._tenant,
                priority=layout.priority_of(stored),
            )
        self._core.cancels.asked(self._key, marker)
        if info.status in (WorkflowStatus.PARKED, WorkflowStatus.PENDING, WorkflowStatus.QUEUED):
            # No pass runs a parked or queued workflow, and none has begun on a pending
            # one (never run, or resumed and not run since): each ends cancelled here.
            await self._core.end_cancelled(self._key, generation, seen=info.status)
        await cancel_children(self._core, stored, parent=self._id, tenant=self._tenant)
        return recorded.first

    async def resume(self) -> bool:
        """Make a parked, failed or cancelled workflow ready again, on the code deployed now.

        Recorded steps still answer from the record; a cancel from before no longer applies.

        Returns:
            Whether this call resumed it: False for a workflow in any other state, or when
            a concurrent resume came first.

        Raises:
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
        """
        info = await self.status()
        if info.status not in (
            WorkflowStatus.PARKED,
            WorkflowStatus.FAILED,
            WorkflowStatus.CANCELLED,
        ):
            return False
        return await self._core.resume(self._key, self._kind)

    async def set_priority(self, priority: WorkPriority) -> bool:
        """Serve this workflow at ``priority`` from now on, within its tenant's turn.

        A ready workflow takes its new place in line at once (behind those of that
        priority that were ready before it); one queued in its gate's line
        (`WorkflowStatus.QUEUED`) takes its new place there; a sleeping, waiting, running
        or parked one keeps it for every later wakeup (a timer, a message, a child's end,
        a resume), and so do its next runs after `Context.continue_as_new` and a fork
        made of it. Inside a workflow body the change is recorded like a step.

        Args:
            priority: A `durably.WorkPriority`.

        Returns:
            Whether this call changed it: False when the workflow had that priority.

        Raises:
            InvalidInputError: ``priority`` is not a `WorkPriority` (before any I/O).
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
            WorkflowFinishedError: The workflow has finished.
        """
        if not isinstance(priority, WorkPriority):  # as a start takes it: no bare int
            raise InvalidInputError(f"priority must be a durably.WorkPriority, got {priority!r}")
        rank = int(priority)
        ctx = current_workflow()
        if ctx is None:
            return await self._set_priority(rank)
        return bool(await ctx._outside("set-priority", lambda: self._set_priority(rank)))

    async def _set_priority(self, rank: int) -> bool:
        checkpointer = (await self._core.stores()).checkpointer
        found = await checkpointer.peek(self._key, [layout.START, *layout.priority_keys(1)])
        if not tenancy.belongs(found, self._tenant):
            raise self._not_found()
        info = await checkpointer.get_status(self._key)
        if info is not None and info.status.finished:
            raise WorkflowFinishedError(
                f"workflow {self._id!r} has finished ({info.status.value}): "
                "its priority no longer matters"
            )
        changes, changed = await layout.priority_changes(checkpointer, self._key, found)
        start = found.get(layout.START)
        if (layout.start_priority(start) if changed is None else changed) == rank:
            return False
        # Recorded first, under the next number: every later wakeup reads it there.
        n = changes + 1
        while not (await checkpointer.supply(self._key, layout.priority_key(n), rank)).first:
            n += 1  # a concurrent change took this number
        gate = start.get("gate") if isinstance(start, dict) else None
        scheduler = self._core.durable(self._kind).scheduler
        while True:
            if isinstance(gate, str) and isinstance(checkpointer, Gating):
                await checkpointer.rerank_queued(self._key, gate, rank)  # if still in line
            await scheduler.reprioritize(self._key, rank)
            # A concurrent change numbered after this one wins, whichever moved the
            # entry last: the last to look sees it and moves the entry to it.
            last, latest = await layout.priority_changes(checkpointer, self._key)
            if last <= n or latest is None:
                return True
            n, rank = last, latest

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self._kind} {self._id!r} of tenant {self._tenant!r}>"


async def find_handle(core: Core, id: str, tenant: str | None = None) -> WorkflowHandle[Any]:
    """The handle of existing workflow ``id`` of ``tenant``, of any kind.

    ``tenant`` None means the running workflow's inside one, else the App's. Its result is
    decoded with the registered kind's return type when the App has it.
    `InvalidInputError` before any I/O for a bad id or tenant, `WorkflowNotFoundError`
    when the tenant has no such workflow.
    """
    owner = tenancy.tenant_of(tenant, current_tenant(core.tenant))
    id = tenancy.looked_up(id)
    tenancy.workflow_key(owner, id)  # a pair too long for a key is refused before I/O
    checkpointer = (await core.stores()).checkpointer
    found = await tenancy.locate(checkpointer, owner, id, older=core.older_layout)
    if found is None:
        raise WorkflowNotFoundError(id, tenant=owner)
    key, stored = found
    return _handle_at(core, key, id, owner, stored)


async def _end_of(
    checkpointer: Checkpointer[Any], key: str
) -> tuple[WorkflowInfo | None, dict[str, object]]:
    """The status of the workflow keyed ``key`` and the record read beside it.

    The result once completed, read with the status (one read, where the store has
    `Looking`); the start record while there is no status (its tenant says whether the
    workflow is there).
    """
    info, stored = await look_at(checkpointer, key, [layout.RESULT])
    if info is None:
        return None, await checkpointer.peek(key, [layout.START])
    if info.status is WorkflowStatus.COMPLETED:
        return info, stored
    return info, {}


def _handle_at(
    core: Core, key: str, id: str, tenant: str, stored: Mapping[str, object]
) -> WorkflowHandle[Any]:
    start = stored.get(layout.START)
    kind = str(start.get("kind")) if isinstance(start, dict) else ""
    registered = core.workflows.get(kind)
    result = registered.signature.result if registered is not None else ANY
    return WorkflowHandle(core, key, id, tenant, kind, result, False)


async def cancel_children(
    core: Core, stored: Mapping[str, object], *, parent: str, tenant: str
) -> None:
    """Cancel the children a workflow's records name (those still running).

    Only those whose start record names workflow ``parent`` of ``tenant``, so a workflow
    that took a swept child's id since is not touched.
    """
    checkpointer = (await core.stores()).checkpointer
    for key in layout.children(stored):
        found = await checkpointer.load(key)
        start = found.get(layout.START)
        if not tenancy.belongs(found, tenant) or not isinstance(start, dict):
            continue  # swept, or not of this tenant
        if start.get("parent") != parent:
            continue
        child_tenant, child_id = tenancy.scope(key, start)
        await _handle_at(core, key, child_id, child_tenant, found)._cancel()


__all__ = ["WorkflowHandle", "cancel_children", "find_handle"]
