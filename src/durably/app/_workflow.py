"""`Workflow`: a registered workflow body, with its start, run and get_handle.

Also the engine body (`Execution` -> result) the Worker serves it with.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from durably.app import _layout as layout
from durably.app import _runs as runs
from durably.app import _tenancy as tenancy
from durably.app._begins import AT_ONCE, Begins
from durably.app._catalogue import catalogue, entry_of
from durably.app._context import (
    Context,
    bind,
    current_tenant,
    current_workflow,
    is_async,
    unbind,
)
from durably.app._core import Core
from durably.app._drift import unread, unread_warning
from durably.app._handles import WorkflowHandle, cancel_children, find_handle
from durably.app._options import OPTIONS, WorkflowOptions
from durably.app._retry import Retry
from durably.app._start_many import start_many
from durably.app._values import Duration, Signature, decoded_record, seconds_of, stored_text
from durably.app._workflow_flow import WorkflowFlow
from durably.app._workflow_gates import WorkflowGates
from durably.engine.runtime import Execution
from durably.engine.schedules import Schedule, tick_text
from durably.engine.tasks import cancel_requested
from durably.errors import (
    ConfigurationError,
    ContinueAsNew,
    DurablyError,
    IncompatibleRecordError,
    InvalidInputError,
    ScheduledWakeup,
    StatePersistenceError,
    StrayCancellationError,
    Suspended,
    WorkflowCancelledError,
    WorkflowConflictError,
    WorkflowStopped,
)
from durably.otel.tracing import annotate, producing
from durably.stores.gates import admit_through
from durably.stores.runs import StateDelta
from durably.stores.starting import WholeStart, whole_starter
from durably.stores.work import WorkPriority
from durably.stores.workflows import (
    DEFAULT_PRIORITY,
    Checkpointer,
    Finish,
    Restart,
    ready_priority,
    value_refused,
)

P = ParamSpec("P")
R = TypeVar("R")


def workflow_priority(priority: object) -> int:
    """``priority`` as stored: NORMAL for None, else a `WorkPriority` (a task's too).

    `InvalidInputError` naming it otherwise, before any I/O.
    """
    if priority is not None and not isinstance(priority, WorkPriority):
        raise InvalidInputError(f"priority must be a durably.WorkPriority, got {priority!r}")
    rank = ready_priority(priority)
    return DEFAULT_PRIORITY if rank is None else rank


class BodyFailed(DurablyError):
    """A workflow body raised: the workflow ends FAILED, unless it opted in to body retries.

    Its error is kept as the original's repr.
    """

    def __init__(self, error: BaseException, *, retryable: bool) -> None:
        self.error = error
        super().__init__(repr(error), retryable=retryable)

    def __repr__(self) -> str:
        return repr(self.error)


class Recorded(Exception):
    """A failure read back from the record; its repr is the recorded text."""

    def __repr__(self) -> str:
        return str(self)


class Cancelled(WorkflowStopped):
    """The body let the cancellation `WorkflowHandle.cancel` asked for end it."""

    status = "cancelled"


class Workflow(Generic[P, R]):
    """A registered workflow: what `App.workflow` makes of a body.

    ``await wf.start(*args)`` starts one and returns its handle; ``await wf.run(*args)``
    starts one and waits for its result. Made by the App, never by hand.
    """

    def __init__(
        self,
        core: Core,
        fn: Callable[Concatenate[Context, P], Awaitable[R]],
        *,
        kind: str,
        retry: Retry | None,
        timeout: float | None,
        max_recovery_attempts: int,
        cron: str | None = None,
        tz: str | None = None,
        debounce: Duration | None = None,
        debounce_key: Callable[..., str] | None = None,
        gates: WorkflowGates | None = None,
        priority: WorkPriority | None = None,
    ) -> None:
        self._core = core
        self.priority = workflow_priority(priority)
        self.fn = fn
        self.kind = layout.bounded(kind, "workflow kind")
        self.retry = retry
        self.timeout = timeout
        self.max_recovery_attempts = max_recovery_attempts
        self.gates = gates if gates is not None else WorkflowGates(self.kind)
        what = f"workflow {kind!r}"
        if not is_async(fn):
            raise ConfigurationError(f"{what}: a workflow body is an async def")
        self.signature = Signature(fn, what, skip=1)
        if not self.signature.leading:
            raise ConfigurationError(f"{what}: the first parameter must be the durably.Context")
        first = self.signature.leading[0]
        if first.kind not in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD):
            raise ConfigurationError(f"{what}: the first parameter must be the durably.Context")
        hint = self.signature.hints.get(first.name)
        if not (isinstance(hint, type) and issubclass(hint, Context)):
            # Unannotated, it may as well be a first argument of the body's own: refused
            # here rather than when a start's arguments are one short.
            got = "no annotation" if hint is None else repr(hint)
            raise ConfigurationError(
                f"{what}: the first parameter must be the durably.Context, annotated "
                f"({first.name}: durably.Context); {first.name!r} has {got}"
            )
        for name in self.signature.names:
            if name in OPTIONS:
                raise ConfigurationError(
                    f"{what}: parameter {name!r} collides with start()'s {name}= option"
                )
        self.flow = WorkflowFlow.of(
            self.kind,
            self.signature,
            cron=cron,
            tz=tz,
            debounce=debounce,
            debounce_key=debounce_key,
        )
        if self.flow.debounce is not None and timeout is not None:
            # Counted from a begin each later start pushes back: it could end it unbegun.
            raise InvalidInputError(f"{what}: timeout= does not apply with debounce=")
        self.__name__ = getattr(fn, "__name__", kind)
        self.__doc__ = fn.__doc__

    def options(
        self,
        *,
        id: str | None = None,
        tenant: str | None = None,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: WorkPriority | None = None,
    ) -> WorkflowOptions[P, R]:
        """Return this workflow with start options, for a start whose arguments are checked.

        A type checker checks the arguments of ``await wf.options(id="t-1").start(ticket)``
        against the body's parameters. `Context.child` and `Context.start_child` take it
        for a child's ``id`` and ``timeout``. Nothing is checked before its ``start``.

        Args:
            id: The workflow's id, as for `start`.
            tenant: The tenant it runs for, as for `start` (never for a child: a child
                runs in its parent's tenant).
            timeout: How long after its start the workflow is cancelled, as for `start`.
            delay: How long before its body may begin, as for `start` (never for a child).
            at: When its body may begin, as for `start` (never for a child).
            priority: The `durably.WorkPriority` it is served at, as for `start`.

        Returns:
            The options, with `WorkflowOptions.start` and `WorkflowOptions.run`.
        """
        return WorkflowOptions(self, id, tenant, timeout, delay, at, priority)

    @overload
    async def start(self, *args: P.args, **kwargs: P.kwargs) -> WorkflowHandle[R]: ...

    @overload
    async def start(
        self,
        *args: Any,
        id: str | None,
        tenant: str | None = None,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: WorkPriority | None = None,
        **kwargs: Any,
    ) -> WorkflowHandle[R]: ...

    @overload
    async def start(
        self,
        *args: Any,
        tenant: str | None,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: WorkPriority | None = None,
        **kwargs: Any,
    ) -> WorkflowHandle[R]: ...

    @overload
    async def start(
        self,
        *args: Any,
        timeout: Duration | None,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: WorkPriority | None = None,
        **kwargs: Any,
    ) -> WorkflowHandle[R]: ...

    @overload
    async def start(
        self,
        *args: Any,
        delay: Duration | None,
        at: datetime | None = None,
        priority: WorkPriority | None = None,
        **kwargs: Any,
    ) -> WorkflowHandle[R]: ...

    @overload
    async def start(
        self,
        *args: Any,
        at: datetime | None,
        priority: WorkPriority | None = None,
        **kwargs: Any,
    ) -> WorkflowHandle[R]: ...

    @overload
    async def start(
        self, *args: Any, priority: WorkPriority | None, **kwargs: Any
    ) -> WorkflowHandle[R]: ...

    # A body's own parameter named like an option is refused at registration, which a
    # type checker cannot know: to it, the options might take the body's keywords.
    async def start(  # type: ignore[misc]
        self,
        *args: Any,
        id: str | None = None,
        tenant: str | None = None,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: WorkPriority | None = None,
        **kwargs: Any,
    ) -> WorkflowHandle[R]:
        """Start this workflow and return its handle.

        Starting an id that exists in the tenant starts nothing and returns its handle
        (``handle.created`` is False; the first start's arguments win): an id is unique
        within its tenant, so the same id under two tenants names two workflows. Inside a
        workflow body the start is recorded like a step.

        A type checker checks the arguments of a call without options against the body's
        parameters; with options given here it cannot (a call's options and the body's
        parameters share no signature): give them with `options` instead,
        ``wf.options(id=...).start(*args)``, to keep the arguments checked.

        Args:
            *args: The body's arguments (after the Context).
            id: The workflow's id. Default: a fresh UUID; inside a workflow body, one
                derived from that workflow's id.
            tenant: The tenant it runs for. Default: the App's; inside a workflow (its
                body or a step), that workflow's.
            timeout: How long after its start the workflow is cancelled, in seconds or a
                timedelta, instead of the one it was registered with (counted from
                when its body may begin, with ``delay`` or ``at``).
            delay: How long from now before its body may begin, in seconds or a
                timedelta (0 or more). Until then the workflow is stored, holds no
                worker and reports `WorkflowStatus.SLEEPING` once a worker saw it.
            at: When its body may begin instead, a timezone-aware datetime on the App's
                clock (one in the past begins at once). Not with ``delay``.
            priority: The `durably.WorkPriority` it is served at within its tenant's
                turn, instead of the one it was registered with: higher first, then
                older, as a task's items.
            **kwargs: The body's keyword arguments.

        Returns:
            The workflow's typed handle.

        Raises:
            InvalidInputError: Arguments that do not fit the body's parameters or
                annotations, or a bad ``id``, ``tenant``, ``timeout`` or ``priority``
                (before any I/O):
                an id of the form durably derives for a body's children
                (``…/child:KIND#N``) or starting with ``durably:``, or a tenant and id
                too long together, included; arguments the store refuses (too large).
            WorkflowConflictError: The id exists in the tenant under another kind.
            WorkflowLimitError: Inside a workflow body, a start past the App's `Limits`.
        """
        ctx = current_workflow()
        if ctx is not None:  # inside a body: recorded, with an id derived from the parent's
            _, handle = await ctx._start_workflow(
                self,
                args,
                kwargs,
                id=id,
                tenant=tenant,
                timeout=timeout,
                child=False,
                begins=Begins(delay, at),
                priority=priority,
            )
            return handle
        # A producer span (with tracing on): the start record carries its context, and
        # every pass of the workflow continues its trace.
        with producing("start", self.kind, {"durably.workflow.kind": self.kind}):
            if self.flow.debounce is not None:
                if delay is not None or at is not None or timeout is not None:
                    raise InvalidInputError(
                        f"workflow {self.kind!r} is debounced: its window sets when it "
                        "begins, so start() takes no delay=, at= or timeout="
                    )
                begins = Begins(delay=self.flow.debounce)
            else:
                begins = Begins(delay, at)
            start = self.prepare(
                args, kwargs, tenant=tenant, timeout=timeout, begins=begins, priority=priority
            )
            workflow = tenancy.new_id(id) if id is not None else str(uuid.uuid4())
            if self.flow.debounce is not None:
                workflow = await self._debounce(workflow, start, args, kwargs)
            annotate(
                {
                    "messaging.message.id": workflow,
                    "durably.workflow.id": workflow,
                    "durably.tenant": start["tenant"],
                }
            )
            # Noted before its first write: an announcement after it is of this start.
            fresh = tenancy.workflow_key(str(start["tenant"]), workflow)
            self._core.waiters.starting(await self._core.stores(), fresh)
            key, created = await self.launch(workflow, start)
            if not created:
                self._core.waiters.unannounced(fresh)  # an earlier workflow: forgotten
            annotate({"durably.workflow.created": created})
        return self.handle(workflow, start["tenant"], created=created, key=key)

    async def start_many(
        self,
        calls: Iterable[Sequence[Any] | Mapping[str, Any]],
        *,
        ids: Sequence[str | None] | None = None,
        tenant: str | None = None,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: WorkPriority | None = None,
    ) -> list[WorkflowHandle[R]]:
        """Start a workflow of this kind per call, in a few round trips to the store.

        Each is started as `start` starts one (an id that exists in the tenant starts
        nothing and gives its handle, ``created`` False), a batch at a time: its start
        records in one write, their catalog entries and run records in one each, their
        wakeups in one. A kind with ``concurrency=``, ``throttle=`` or ``debounce=``, or an
        App with tenant caps, starts each through `start`'s own path, a few at once.

        Args:
            calls: Each workflow's arguments: a tuple of positional arguments or a
                mapping of keyword arguments. At most 1,000.
            ids: An id per call (None for a fresh UUID), as `start`'s ``id``.
            tenant: The tenant they run for (default: the App's).
            timeout: How long after its start each is cancelled, as for `start`.
            delay: How long from now before each body may begin, as for `start`.
            at: When each body may begin instead, as for `start`.
            priority: The `durably.WorkPriority` each is served at, as for `start`.

        Returns:
            Per call, in order, the workflow's typed handle.

        Raises:
            InvalidInputError: Before any I/O, for any call, what `start` refuses; more
                than 1,000 calls; ``ids`` of another length, or naming one id twice.
            WorkflowConflictError: An id exists in the tenant under another kind (the
                other starts of the batch are made first).
            ConfigurationError: A call inside a workflow body, where each start is
                recorded as a step: start them one by one there.
        """
        if current_workflow() is not None:
            raise ConfigurationError(
                f"workflow {self.kind!r}: start_many is not recorded as a step; inside a "
                "workflow body, start each with start()"
            )
        with producing("start", self.kind, {"durably.workflow.kind": self.kind}):
            return await start_many(
                self,
                calls,
                ids=ids,
                tenant=tenant,
                timeout=timeout,
                delay=delay,
                at=at,
                priority=priority,
            )

    async def _debounce(
        self,
        workflow: str,
        start: dict[str, Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> str:
        """The id of the pending workflow a debounced start joins, or ``workflow`` made so.

        The store gives the pending one these arguments and pushes its begin back.
        """
        slot = self.flow.slot(str(start["tenant"]), args, kwargs)
        start["debounce"] = slot
        queue = (await self._core.stores()).queue
        debounce = getattr(queue, "debounce", None)
        if debounce is None:
            raise ConfigurationError(f"{type(queue).__name__} keeps no debounce slots")
        args_text, due = _compact(start["args"]), float(start["not_before"])
        stores = await self._core.stores()
        for _ in range(_DEBOUNCE_TRIES):
            pending: str = await debounce(slot, workflow, args_text, due)
            if pending == workflow:
                return pending
            info = await stores.checkpointer.get_status(
                tenancy.workflow_key(str(start["tenant"]), pending)
            )
            if info is None or not info.status.finished:
                return pending
            # Ended before it began (a cancel): it will never take its slot, so this start
            # deletes it and asks for a slot of its own.
            await queue.release_debounced(slot, pending)  # type: ignore[attr-defined]
        raise ConfigurationError(
            f"workflow {self.kind!r}: debounce slot {slot!r} kept naming ended workflows"
        )

    async def _begin_debounced(self, slot: str, workflow: str) -> dict[str, object]:
        """Ask the store whether debounced ``workflow`` may begin now (a `Begun`, as a dict)."""
        queue = (await self._core.stores()).queue
        begun = await queue.begin_debounced(  # type: ignore[attr-defined]
            slot, workflow, self._core.clock.now()
        )
        if begun.args is not None:
            return {"args": begun.args}
        return {} if begun.due is None else {"due": begun.due}

    async def _release_debounced(self, slot: str, workflow: str) -> bool:
        """Delete the slot debounced ``workflow`` took: whether it was deleted.

        A later start that named another workflow in the slot keeps it.
        """
        queue = (await self._core.stores()).queue
        released: bool = await queue.release_debounced(slot, workflow)  # type: ignore[attr-defined]
        return released

    def schedule(self) -> Schedule | None:
        """The cron schedule of a workflow registered with ``cron=`` (None: none).

        Each tick starts one workflow, its id the kind and the tick (``KIND@TICK``), its
        time given to the body's datetime parameter.
        """
        return self.flow.schedule(self._core.tenant, self._start_tick)

    def on_cron(self, cron: str, tz: str) -> Schedule:
        """The schedule starting this workflow at every tick of ``cron`` in ``tz``.

        `App.schedule` registers it.

        Args:
            cron: A five-field cron expression.
            tz: The IANA time zone of its ticks.

        Raises:
            InvalidInputError: A ``cron`` that does not parse, an unknown ``tz``.
            ConfigurationError: A body whose parameters a tick cannot fill.
        """
        flow = WorkflowFlow.of(
            self.kind,
            self.signature,
            cron=cron,
            tz=tz,
            debounce=self.flow.debounce,
            debounce_key=self.flow.key_of,
        )
        schedule = flow.schedule(self._core.tenant, self._start_tick)
        if schedule is None:  # pragma: no cover - a cron was given
            raise ConfigurationError(f"workflow {self.kind!r}: no cron given")
        self.flow = flow
        return schedule

    async def _start_tick(self, tick: float) -> None:
        """Start the workflow of cron tick ``tick`` (a repeat finds the one started)."""
        stamp = tick_text(tick)
        positional = () if self.flow.tick_parameter is None else (datetime.fromisoformat(stamp),)
        start = self.prepare(positional, {}, tenant=self._core.tenant, timeout=None)
        await self.launch(tenancy.new_id(f"{self.kind}@{stamp}"), start)

    def prepare(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        tenant: str | None,
        timeout: Duration | None,
        parent: str | None = None,
        parent_kind: str | None = None,
        parent_key: str | None = None,
        depth: int = 0,
        begins: Begins = AT_ONCE,
        priority: WorkPriority | None = None,
        parent_priority: int = DEFAULT_PRIORITY,
    ) -> dict[str, Any]:
        """The start record for a call with ``args``, checked before any I/O."""
        rank = self.priority if priority is None else workflow_priority(priority)
        now = self._core.clock.now()
        not_before = begins.not_before(now)
        encoded = self.signature.encode_args(args, kwargs)
        gate = self.gates.gate_name(args, kwargs)
        owner = tenancy.tenant_of(tenant, current_tenant(self._core.tenant))
        limit = timeout if timeout is not None else self.timeout
        seconds = None if limit is None else seconds_of(limit, "timeout")
        begin = now if not_before is None else max(now, not_before)
        return layout.start_record(
            kind=self.kind,
            args=encoded,
            tenant=owner,
            created=now,
            parent=parent,
            parent_kind=parent_kind,
            parent_key=parent_key,
            timeout_at=None if seconds is None else begin + seconds,
            depth=depth,
            not_before=not_before,
            gate=gate,
            priority=rank,
            parent_priority=parent_priority,
        )

    async def launch(self, workflow: str, start: dict[str, Any]) -> tuple[str, bool]:
        """Supply ``start`` for workflow ``workflow`` of the tenant it names, and make it ready.

        The first writer wins. Returns its key and whether this call created it;
        `WorkflowConflictError` if the id has another kind, or (a child's start) is not a
        child of the parent ``start`` names.
        """
        tenant = str(start["tenant"])
        key = tenancy.workflow_key(tenant, workflow)
        stores = await self._core.stores()
        checkpointer = stores.checkpointer
        if self._core.older_layout and key != workflow:
            older = await checkpointer.load(workflow)
            if tenancy.belongs(older, tenant):  # started before tenants scoped ids
                self._adoptable(workflow, older[layout.START], start)
                await self._ready(workflow, tenant, older[layout.START], first=False)
                return workflow, False
        start = await self._throttled(checkpointer, start)
        # The kind's scheduler is opened first: a start that admits workflows from the line
        # (a raised limit) makes them ready through it.
        durable = self._core.durable(self.kind)
        gate = self.gates.gate(start.get("gate"), layout.start_priority(start))
        whole = None if gate is not None else whole_starter(durable)
        try:
            if whole is not None:
                # Where the stores share a database: the record, its catalog entry, its
                # run record and its wakeup in one commit.
                started = await whole.start_whole(
                    WholeStart(
                        key,
                        layout.START,
                        start,
                        tenant,
                        layout.start_priority(start),
                        entry_of(start),
                        runs.opened_run(tenant, workflow, self.kind, key),
                    ),
                    caps=self._core.caps,
                    state=stores.state,
                )
                recorded = started.recorded
                self._adoptable(workflow, recorded.value, start)
                if started.opened:
                    return key, True
                queued = False
            else:
                # Counted under its tenant by the store in the same write, and refused
                # there (WorkflowLimitError, nothing written) past the tenant's caps; past
                # its gate's limit, queued there (status QUEUED) and made ready by the
                # store when a slot frees.
                admission = await admit_through(
                    checkpointer,
                    key,
                    layout.START,
                    start,
                    tenant=tenant,
                    caps=self._core.caps,
                    gate=gate,
                )
                recorded, queued = admission.recorded, admission.queued
                self._adoptable(workflow, recorded.value, start)
        except (StatePersistenceError, InvalidInputError) as exc:
            # Refused by the store's own checks (its size limit, its codec), which run
            # before it writes: named here, as the caller's other bad input is.
            if isinstance(exc, StatePersistenceError) and exc.reason != "too_large":
                raise
            raise InvalidInputError(
                f"workflow {self.kind!r}: the store refuses its arguments: {exc}"
            ) from None
        # Every start catalogues (a repeat repairs a start that crashed before it did); the
        # first opens its run record too, before its wakeup, so no pass reports a status
        # its run record lacks. Neither reads what the other writes: both at once.
        writes = [catalogue(checkpointer, key, recorded.value)]
        if recorded.first:
            writes.append(runs.open_run(stores.state, tenant, workflow, self.kind, key))
        for outcome in await asyncio.gather(*writes, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome
        if not queued:  # a queued one is made ready by the write admitting it
            await self._ready(key, tenant, recorded.value, first=recorded.first)
        return key, recorded.first

    async def _throttled(
        self, checkpointer: Checkpointer[Any], start: dict[str, Any]
    ) -> dict[str, Any]:
        """``start`` delayed to the slot ``throttle=`` reserves for it, if that is later.

        Its timeout moves with it.
        """
        created = float(start["created"])
        slot = await self.gates.begins(checkpointer, created)
        begin = start.get("not_before") or created
        if slot is None or slot <= begin:
            return start
        timeout_at = start.get("timeout_at")
        moved = None if timeout_at is None else timeout_at + (slot - begin)
        return {**start, "not_before": slot, "timeout_at": moved}

    def _adoptable(self, workflow: str, existing: object, start: Mapping[str, Any]) -> None:
        """Refuse to hand out workflow ``workflow`` whose start record is ``existing``.

        `WorkflowConflictError` for a start of ``start`` that may not have it: of another
        tenant (only a bare id, stored before tenants scoped ids), of another kind, or, for
        a child, not a child of the same parent.
        """
        found = existing if isinstance(existing, dict) else {}
        kind = str(found.get("kind"))
        if found.get("tenant", tenancy.DEFAULT_TENANT) != start["tenant"]:
            raise WorkflowConflictError(
                workflow,
                self.kind,
                kind,
                reason="is taken by a workflow of another tenant stored before ids were "
                "scoped by tenant: start this one under another id",
            )
        if kind != self.kind:
            raise WorkflowConflictError(workflow, self.kind, kind)
        parent = start.get("parent")
        if parent is not None and found.get("parent") != parent:
            raise WorkflowConflictError(
                workflow,
                self.kind,
                kind,
                reason=f"exists and is not a child of workflow {parent!r}: a body waits "
                "only for the children it started",
            )

    async def _ready(self, key: str, tenant: str, start: object, *, first: bool) -> None:
        # A start that crashed between its record and its wakeup is repaired by the next.
        checkpointer = (await self._core.stores()).checkpointer
        if first or await checkpointer.get_status(key) is None:
            # Served in its tenant's turn (the scheduler's fairness order), at the priority
            # the first start recorded, or (a repeated start) the one it was moved to since.
            changed = None if first else await layout.changed_priority(checkpointer, key)
            priority = layout.start_priority(start) if changed is None else changed
            await self._core.durable(self.kind).scheduler.make_ready(
                key, tenant=tenant, priority=priority
            )

    def handle(
        self, id: str, tenant: str | None = None, *, created: bool = False, key: str | None = None
    ) -> WorkflowHandle[R]:
        """Return a typed handle on a workflow of this kind, without any I/O.

        Nothing is checked: a handle on an id the tenant has no workflow under raises
        `WorkflowNotFoundError` from its calls.

        Args:
            id: The workflow's id.
            tenant: The workflow's tenant. Default: the App's; inside a workflow (its
                body or a step), that workflow's.
            created: What the handle's `WorkflowHandle.created` says.
            key: Where the store keeps the workflow, when known (the App's own calls).

        Raises:
            InvalidInputError: A ``tenant`` that is not usable, or an ``id`` too long
                for it.
        """
        owner = tenancy.tenant_of(tenant, current_tenant(self._core.tenant))
        at = key if key is not None else tenancy.workflow_key(owner, id)
        return WorkflowHandle(self._core, at, id, owner, self.kind, self.signature.result, created)

    @overload
    async def run(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    @overload
    async def run(
        self,
        *args: Any,
        id: str | None,
        tenant: str | None = None,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: datetime | None = None,
        **kwargs: Any,
    ) -> R: ...

    @overload
    async def run(
        self,
        *args: Any,
        tenant: str | None,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: datetime | None = None,
        **kwargs: Any,
    ) -> R: ...

    @overload
    async def run(
        self,
        *args: Any,
        timeout: Duration | None,
        delay: Duration | None = None,
        at: datetime | None = None,
        **kwargs: Any,
    ) -> R: ...

    @overload
    async def run(
        self, *args: Any, delay: Duration | None, at: datetime | None = None, **kwargs: Any
    ) -> R: ...

    @overload
    async def run(self, *args: Any, at: datetime | None, **kwargs: Any) -> R: ...

    # A body's own parameter named like an option is refused at registration, which a
    # type checker cannot know: to it, the options might take the body's keywords.
    async def run(  # type: ignore[misc]
        self,
        *args: Any,
        id: str | None = None,
        tenant: str | None = None,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: WorkPriority | None = None,
        **kwargs: Any,
    ) -> R:
        """Start this workflow and wait for its result, for as long as it takes.

        Refused inside a workflow body, where waiting would hold the pass: use
        `Context.child` there. Its arguments are checked as `start`'s are.

        Args:
            *args: The body's arguments (after the Context).
            id: The workflow's id (default: a fresh UUID); as for `start`, an existing id
                starts nothing, and its result is waited for.
            tenant: The tenant it runs for (default: the App's).
            timeout: As for `start`.
            delay: As for `start`.
            at: As for `start`.
            priority: As for `start`.
            **kwargs: The body's keyword arguments.

        Returns:
            The body's return value, decoded to its annotated type.

        Raises:
            ConfigurationError: Called inside a workflow body.
            InvalidInputError: As for `start`.
            WorkflowConflictError: The id exists under another kind.
            WorkflowFailedError: The workflow failed; carries the recorded error.
            WorkflowCancelledError: The workflow was cancelled or timed out.
        """
        if current_workflow() is not None:
            raise ConfigurationError(
                f"workflow {self.kind!r}: awaiting run() inside a workflow body would hold "
                "the pass; use ctx.child"
            )
        handle = await self.start(
            *args,
            id=id,
            tenant=tenant,
            timeout=timeout,
            delay=delay,
            at=at,
            priority=priority,
            **kwargs,
        )
        return await handle.result()

    async def get_handle(self, id: str, tenant: str | None = None) -> WorkflowHandle[R]:
        """Find an existing workflow of this kind by its id within a tenant.

        Args:
            id: The workflow's id.
            tenant: The tenant to look in. Default: the App's; inside a workflow (its
                body or a step), that workflow's.

        Returns:
            Its typed handle.

        Raises:
            InvalidInputError: An ``id`` or ``tenant`` that is not usable, or the two too
                long together (before any I/O).
            WorkflowNotFoundError: The tenant has no workflow of this id (never started,
                or swept).
            WorkflowConflictError: The workflow is of another kind.
        """
        handle = await find_handle(self._core, id, tenant)
        if handle.kind != self.kind:
            raise WorkflowConflictError(id, self.kind, handle.kind)
        return self.handle(handle.id, handle.tenant, key=handle._key)

    async def body(self, run: Execution) -> object:
        """One pass of this workflow over the engine's `Execution` (what the Worker serves)."""
        recorded = run.recorded
        start = layout.read_start(recorded, run.workflow)  # one of another shape parks it
        if start is None:
            raise BodyFailed(
                ConfigurationError(f"workflow {run.workflow!r} has no start record"),
                retryable=False,
            )
        ctx = Context(
            run,
            start,
            self.kind,
            cancels=self._core.cancels,
            limits=self._core.limits,
            encode_args=self.signature.encode_args,
            usage=functools.partial(self._add_usage, run.workflow, start),
        )
        ended = layout.ending(recorded) if ctx._ended else None
        if ended is not None:  # a wakeup after the end: report the same end, run nothing
            # The pass that recorded it may have died before it let go of its slot.
            await self._let_go(run, start, ctx.id)
            if "v" in ended:
                return decoded_record(
                    run.workflow, layout.RESULT, self.signature.result, ended["v"]
                )
            if ended.get("cancelled"):
                raise Cancelled(_cancelled(ctx.id, ended.get("e") == layout.TIMED_OUT))
            raise BodyFailed(Recorded(str(ended.get("e"))), retryable=False)
        positional, keywords = self.arguments(ctx.id, start)
        running = self._core.cancels.begin(run.workflow, ctx._cancel_key)
        token = bind(ctx)
        try:
            try:
                value = await self._call(ctx, positional, keywords)
            finally:
                # What its branches still run lands before this pass records anything of
                # its end (a child started after `cancel_children` would outlive it).
                if run.busy:
                    await run.drain()
        except ContinueAsNew as request:
            if ctx._stopped is not None:
                raise ctx._stopped from None
            return await self._continue(run, start, request)
        except Suspended as exc:
            if ctx.deadline is None or ctx._timed_out:
                raise
            # The pass waits or sleeps: its workflow timeout wakes it too.
            timeout = ScheduledWakeup(layout.TIMEOUT, ctx.deadline)
            raise BaseExceptionGroup("suspended", [exc, timeout]) from None
        except asyncio.CancelledError as exc:
            if ctx._stopped is not None:
                raise ctx._stopped from None
            if cancel_requested():
                raise  # the worker's: a shutdown or a lost claim
            if not ctx._cancel_delivered:
                # Nobody cancelled it: the body failed, as with any other exception.
                raise await self._failed(run, ctx, StrayCancellationError("the body")) from exc
            ending = layout.TIMED_OUT if ctx._timed_out else "cancelled"
            await self._end(run, ctx, layout.CANCELLED, ending)
            # Its children end with it (a timeout is a cancel; a child started just
            # before the cancel was seen is not in the records `cancel` read).
            await cancel_children(self._core, run.recorded, parent=ctx.id, tenant=ctx.tenant)
            raise Cancelled(_cancelled(ctx.id, ctx._timed_out)) from exc
        except Exception as exc:
            if ctx._stopped is not None:
                raise ctx._stopped from exc
            if isinstance(exc, WorkflowStopped):
                # A record that cannot be read, met beyond the body's own (a child's, on
                # `ctx.child`): parked as its own would park it, resumable once repaired.
                raise
            if isinstance(exc, DurablyError) and exc.retryable:
                raise  # a store error on the way: the worker retries the pass
            raise await self._failed(run, ctx, exc) from exc
        finally:
            unbind(token)
            self._core.cancels.forget(run.workflow, running)
        if ctx._stopped is not None:
            raise ctx._stopped
        if ctx._continued is not None:  # caught by the body, which then returned
            return await self._continue(run, start, ctx._continued)
        if ctx._unmet:
            self._warn_unread(ctx)
        try:
            encoded = self.signature.result.encode(value)
        except Exception as exc:
            await self._end(run, ctx, layout.FAILED, layout.failure(exc))
            raise BodyFailed(exc, retryable=False) from exc
        if start.get("parent") is not None and start.get("parent_kind") is not None:
            # The parent runs as soon as it is woken, so the result is written first.
            try:
                await run.step(layout.RESULT, lambda: encoded)
            except Exception as exc:
                if not value_refused(exc):
                    raise
                # A result no store takes (too large, say): the parent hears of a failure.
                unstored = DurablyError(f"the workflow's result was not stored: {exc}")
                await self._end(run, ctx, layout.FAILED, layout.failure(unstored))
                raise BodyFailed(unstored, retryable=False) from exc
            await self._wake_parent(start)
            return value
        # No one to wake: the Worker writes the result with the COMPLETED status, one write.
        return Finish(layout.RESULT, encoded, value)

    async def _add_usage(self, key: str, start: Mapping[str, Any], delta: StateDelta) -> None:
        tenant, id = tenancy.scope(key, start)
        state = (await self._core.stores()).state
        await runs.add_usage(state, tenant, id, self.kind, key, delta)

    def arguments(
        self, workflow: str, start: Mapping[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """The body's arguments decoded from start record ``start`` of ``workflow`` (its id).

        Raises `IncompatibleRecordError` when they no longer fit the body's annotations.
        """
        try:
            return self.signature.decode_args(start.get("args", {}))
        except (ValueError, KeyError, RecursionError) as exc:
            raise IncompatibleRecordError(
                workflow,
                layout.START,
                f"arguments of {self.kind}",
                stored_text(start.get("args")),
                str(exc),
            ) from None

    async def _call(self, ctx: Context, positional: list[Any], keywords: dict[str, Any]) -> object:
        """Run the body and return its value.

        A `continue_as_new` raised inside a task group comes out bare, as if the body had
        raised it itself.
        """
        try:
            await ctx._wait_to_begin()
            slot = ctx._start.get("debounce")
            if isinstance(slot, str):  # the last arguments given within the window
                take = functools.partial(self._begin_debounced, slot, ctx.id)
                release = functools.partial(self._release_debounced, slot, ctx.id)
                encoded = await ctx._wait_for_debounce(take, release)
                if encoded is not None:
                    positional, keywords = self.arguments(ctx.id, {"args": json.loads(encoded)})
            return await self.fn(ctx, *positional, **keywords)
        except BaseExceptionGroup as group:
            if ctx._continued is not None and group.subgroup(ContinueAsNew) is not None:
                raise ctx._continued from None
            raise

    async def _continue(
        self, run: Execution, start: Mapping[str, Any], request: ContinueAsNew
    ) -> Restart:
        """End this run for `Context.continue_as_new`.

        The messages it took are deleted first (the next run must not take them again);
        the Worker then writes the new start record, keeping what `layout.KEPT_ACROSS_RUNS`
        names, and makes the workflow ready.
        """
        taken = layout.consumed_messages(run.recorded)
        if taken:
            await run.forget(taken)
        fresh = {**start, "args": request.arguments, "run": int(start.get("run", 1)) + 1}
        fresh.pop("not_before", None)  # a delayed start delays its first run only
        fresh.pop("debounce", None)  # and a debounced one debounces it only
        return Restart(layout.START, fresh, layout.KEPT_ACROSS_RUNS)

    async def _failed(self, run: Execution, ctx: Context, exc: BaseException) -> BodyFailed:
        """The body raised ``exc``: its end recorded unless the workflow retries bodies."""
        if ctx._unmet:
            self._warn_unread(ctx)
        if self.retry is None:
            await self._end(run, ctx, layout.FAILED, layout.failure(exc))
        return BodyFailed(exc, retryable=self.retry is not None)

    async def _end(self, run: Execution, ctx: Context, name: str, ended: object) -> None:
        """Record how this generation ended and wake a parent.

        ``ended`` is a `layout.failure` record, or how it was cancelled.
        """
        await run.step(layout.occurrence(name, ctx.generation), lambda: ended)
        # Ended before it began (cancelled or failed in its window): its key starts afresh.
        await self._let_go(run, ctx._start, ctx.id)
        await self._wake_parent(ctx._start)

    async def _let_go(self, run: Execution, start: Mapping[str, Any], id: str) -> None:
        """Delete the debounce slot this workflow holds (its end is recorded).

        Skipped when its body took the slot and released it already.
        """
        slot = start.get("debounce")
        if isinstance(slot, str) and layout.RELEASED not in run.recorded:
            await self._release_debounced(slot, id)

    def _warn_unread(self, ctx: Context) -> None:
        """Warn when the body ended without reading records earlier passes left.

        Steps removed, or skipped by changed code, under the in-flight workflow.
        """
        keys = unread(ctx._unmet)
        if keys:
            # Not the context's logger: that one is quiet while records are unread.
            logging.getLogger(f"durably.workflow.{self.kind}").warning(
                unread_warning(ctx.id, keys),
                extra={"workflow": ctx.id, "kind": self.kind, "unread": keys},
            )

    async def _wake_parent(self, start: Mapping[str, Any]) -> None:
        await self._core.wake_parent(start)

    def __repr__(self) -> str:
        return f"<durably workflow {self.kind!r}>"


def _cancelled(workflow: str, timed_out: bool) -> str:
    return str(WorkflowCancelledError(workflow, timed_out=timed_out))


_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_DEBOUNCE_TRIES = 3
"""Times a debounced start asks for a slot past workflows that ended before they began."""

__all__ = ["BodyFailed", "Cancelled", "Workflow"]
