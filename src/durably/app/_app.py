"""`App`: the application layer over one backing's stores.

It registers workflows and steps, starts them, finds their handles, and serves them with the
engine's `Worker`.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

from pydantic import SecretStr

from durably.app._context import Context
from durably.app._core import Core
from durably.app._driving import Driver
from durably.app._handles import WorkflowHandle, find_handle
from durably.app._limits import Limits
from durably.app._operating import Operating
from durably.app._retry import Retry
from durably.app._steps import Step
from durably.app._tasks import DEFAULT_DEDUPE_TTL, DEFAULT_RETRY, Task, TaskOptions
from durably.app._values import Duration, seconds_of
from durably.app._workflow import Workflow, workflow_priority
from durably.app._workflow_gates import WorkflowGates
from durably.clock import Clock, SystemClock
from durably.engine.schedules import Schedule
from durably.errors import ConfigurationError, DurablyError, InvalidInputError
from durably.stores.dsn import DSN_ENV, describe, parse, redacted
from durably.stores.flow import Throttle
from durably.stores.opening import Stores
from durably.stores.work import DEFAULT_QUEUE, WorkPriority, dedupe_window
from durably.validation import identifier

if TYPE_CHECKING:
    from starlette.applications import Starlette

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_DSN = "sqlite:///durably.db"
MAX_RETENTION = 100 * 365.25 * 86400.0
"""The longest ``retention=`` an App takes, in seconds: 100 years. Longer is "for ever" in
practice, and past about 2,000 years the sweep's cut-off (now minus retention) is not
even a date: the sweep would fail on every round."""
MAX_LEASE = 3600.0
"""The longest ``lease=`` an App takes, in seconds: one hour, the claim budget of one pass
(`durably.engine.Worker`'s default ``budget``, which the App serves with): a claim never outlives
it, so a longer lease would only delay taking over a dead worker's workflow."""


class StepDecorator(Protocol):
    """What ``@app.step(...)`` with options returns: registers an async or plain step."""

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> Step[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> Step[P, R]: ...


class TaskDecorator(Protocol):
    """What ``@app.task(...)`` with options returns: registers an async or plain task."""

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> Task[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> Task[P, R]: ...


_logger = logging.getLogger("durably.app")


class App(Operating):
    """Workflows and steps over the stores one DSN names.

    Register bodies with `workflow` and steps with `step`, start them from the decorated
    functions, find them with `get_handle`, and run them with `serve` (`run_until_idle` in
    tests). Constructing an App does no I/O: the stores open on first use, creating or
    migrating the schema; close them with ``await app.close()`` or ``async with app:``.

    Args:
        dsn: The backing: ``sqlite:///file.db``, ``postgresql://...``, ``redis://...`` or
            ``memory://``, as text or a `SecretStr` (kept as one: `dsn` shows it with the
            password masked). None reads ``$DURABLY_DSN``, else ``sqlite:///durably.db``.
            On PostgreSQL and Redis, ``?pool_size=N`` and ``?pool_timeout=S`` size the
            connection pool and its wait (see `open_stores`).
        clock: The clock workflows read (``ctx.now()``) and sleep by: a `durably.Clock`
            instance (default `SystemClock`; a `ManualClock` in tests).
        tenant: The tenant of a workflow started without ``tenant=``.
        retention: How long a finished workflow is kept (and its id stays idempotent)
            before `serve` sweeps it, in seconds or a timedelta; at most `MAX_RETENTION`
            (100 years).
        migrate: Create or migrate the schema on first open; False only verifies it.
        lease: How long a pass whose worker died keeps its workflow before another worker
            takes it over (a live pass renews it), in seconds or a timedelta; at most
            `MAX_LEASE` (one hour).
        limits: How much one workflow body may start (`durably.Limits`; default: 10,000
            workflows, chains 100 deep); a start past them raises `WorkflowLimitError` in
            the body.

    Raises:
        DsnError: A malformed DSN, an empty string included (a `ConfigurationError`).
        InvalidInputError: A bad tenant, a clock that is not a `durably.Clock` instance, a
            ``retention`` or ``lease`` that is not a positive duration within its limit, or
            ``limits`` that is not a `durably.Limits`.
    """

    def __init__(
        self,
        dsn: str | SecretStr | None = None,
        *,
        clock: Clock | None = None,
        tenant: str = "default",
        retention: Duration = timedelta(days=7),
        migrate: bool = True,
        lease: Duration = 30.0,
        limits: Limits | None = None,
    ) -> None:
        # Only ``dsn=None`` means "the default": an explicit "" is a mistake, not a wish.
        self._implicit = dsn is None and not os.environ.get(DSN_ENV)
        # Held secret from here on: a frame's locals are what error reporters capture.
        if dsn is None:
            dsn = os.environ.get(DSN_ENV) or DEFAULT_DSN
        dsn = dsn if isinstance(dsn, SecretStr) else SecretStr(dsn)
        parse(dsn)  # a malformed DSN fails here (DsnError), not at first use
        # Clock is a runtime-checkable protocol, so a class (``ManualClock`` without its
        # parentheses) would pass for an instance: refused too.
        if clock is not None and (isinstance(clock, type) or not isinstance(clock, Clock)):
            raise InvalidInputError(
                "clock must be a durably.Clock instance (now() and sleep()), got "
                f"{clock.__name__ if isinstance(clock, type) else type(clock).__name__}"
            )
        self._core = Core(
            dsn,
            clock=clock if clock is not None else SystemClock(),
            tenant=identifier(tenant, "tenant"),
            retention=_at_most(retention, "retention", MAX_RETENTION, "100 years"),
            lease=_at_most(lease, "lease", MAX_LEASE, "one hour"),
            migrate=migrate,
            limits=_limits(limits),
        )
        self._driver = Driver(self._core)

    @property
    def dsn(self) -> str:
        """The DSN this App's stores open from, its password masked as ``***``.

        Safe to print and log: the App keeps the DSN itself as a `SecretStr`.
        """
        return redacted(self._core.dsn)

    @dsn.setter
    def dsn(self, dsn: str | SecretStr) -> None:
        """Point the App at another store before it opens (``durably worker --dsn`` does).

        Raises:
            DsnError: For a malformed DSN, before any I/O.
            ConfigurationError: When the stores are already open.
        """
        secret = dsn if isinstance(dsn, SecretStr) else SecretStr(dsn)
        del dsn  # held secret from here on, also in this frame's locals
        parse(secret)
        self._core.retarget(secret)
        self._implicit = False

    @property
    def clock(self) -> Clock:
        """The clock workflows read (``ctx.now()``) and sleep by."""
        return self._core.clock

    @property
    def tenant(self) -> str:
        """The tenant of what is started, and looked up, without ``tenant=``.

        Inside a workflow (its body or a step), that workflow's tenant is the default
        instead.
        """
        return self._core.tenant

    @property
    def retention(self) -> float:
        """Seconds a finished workflow is kept before `serve` sweeps it."""
        return self._core.retention

    @property
    def lease(self) -> float:
        """Seconds a dead worker's pass keeps its workflow before another takes over."""
        return self._core.lease

    @property
    def limits(self) -> Limits:
        """How much one workflow body may start."""
        return self._core.limits

    # --- registering -----------------------------------------------------------------------

    @overload
    def workflow(
        self, fn: Callable[Concatenate[Context, P], Awaitable[R]], /
    ) -> Workflow[P, R]: ...

    @overload
    def workflow(
        self,
        /,
        *,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: Duration | None = None,
        max_recovery_attempts: int = 100,
        cron: str | None = None,
        tz: str | None = None,
        debounce: Duration | None = None,
        debounce_key: Callable[..., str] | None = None,
        concurrency: int | None = None,
        concurrency_key: Callable[..., str] | None = None,
        throttle: Throttle | str | None = None,
        priority: WorkPriority | None = None,
    ) -> Callable[[Callable[Concatenate[Context, P], Awaitable[R]]], Workflow[P, R]]: ...

    def workflow(
        self,
        fn: Callable[..., Awaitable[Any]] | None = None,
        /,
        *,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: Duration | None = None,
        max_recovery_attempts: int = 100,
        cron: str | None = None,
        tz: str | None = None,
        debounce: Duration | None = None,
        debounce_key: Callable[..., str] | None = None,
        concurrency: int | None = None,
        concurrency_key: Callable[..., str] | None = None,
        throttle: Throttle | str | None = None,
        priority: WorkPriority | None = None,
    ) -> Any:
        """Register a workflow body, as ``@app.workflow`` or ``@app.workflow(name=...)``.

        The body is an ``async def`` whose first parameter is the `durably.Context`
        (annotated so); the others are its arguments. Arguments and result are encoded
        from the annotations (pydantic), checked here at decoration, not after a paid
        call; one whose values would not come back as given (``Any``, a bare ``dict``) is
        warned of (`durably.errors.ValueTypeWarning`).

        Args:
            fn: The body, when the decorator is used bare.
            name: The workflow's kind, which its records and workers know it by. Default:
                the body's ``module.qualname``.
            retry: Retries of the whole body when it raises (default: none; its steps
                retry on their own).
            timeout: How long after its start a workflow is cancelled, in seconds or a
                timedelta (default: never); ``start(timeout=...)`` overrides it.
            max_recovery_attempts: How many passes may end without reporting (a dead
                worker, a lost claim) before the workflow is parked.
            cron: A five-field cron expression: every worker `serve` runs starts one
                workflow per tick, once however many run, with the id ``KIND@TICK``
                (the tick in ISO 8601, UTC) in the App's tenant; a body with one
                ``datetime`` parameter receives the tick's time.
            tz: The IANA time zone of ``cron=`` (default UTC).
            debounce: A window, in seconds or a timedelta: a start while a start of the
                same key is pending (its body not begun) joins that workflow, giving it
                its arguments and pushing its begin back to now plus the window; the
                body runs once, with the last arguments. The start returns the pending
                workflow's handle.
            debounce_key: A callable of the body's arguments answering the debounce key
                (a string); default one key per kind. Keys are per tenant.
            concurrency: The most workflows of this kind admitted and unfinished at
                once (waiting, sleeping and parked included), across every worker; a
                start past it is `WorkflowStatus.QUEUED` until one of them finishes.
            concurrency_key: With ``concurrency``, a function of a start's arguments
                (as the body takes them) returning a string: the limit holds per key.
            throttle: At most this rate of starts begin (a `durably.Throttle` or text
                such as ``"10/minute"``); a start past it begins later, never dropped.
            priority: The `durably.WorkPriority` its workflows are served at within their
                tenant's turn (default NORMAL): higher first, then older, as a task's
                items; ``wf.options(priority=...)`` overrides it per start.

        Returns:
            The `Workflow`; with options alone, a decorator that makes it.

        Raises:
            ConfigurationError: At decoration: a default kind under ``__main__`` (a script
                and a worker importing it would disagree on it), a kind registered twice,
                a body that is not ``async def`` or whose first parameter is not annotated
                as the Context, a parameter named ``id``, ``tenant`` or ``timeout``,
                ``*args`` or ``**kwargs``, a missing or unencodable annotation, a cron
                workflow with parameters other than one ``datetime``, a schedule of its
                kind registered already; at the call, a ``max_recovery_attempts`` that is
                not an int of at least 1.
            InvalidInputError: A ``timeout`` that is not a positive duration, a
                ``concurrency`` that is no int from 1, a ``concurrency_key`` that is not
                callable or comes without ``concurrency``, a ``throttle`` that is no
                rate or comes with ``debounce``; at decoration, a kind that is empty,
                over 400 bytes or not storable text, a ``cron`` that does not parse, an
                unknown ``tz`` (or one without ``cron``), a ``debounce`` that is not a
                positive duration, a ``debounce_key`` that is not callable (or without
                ``debounce``), a ``priority`` that is not a `durably.WorkPriority`.
        """
        seconds = None if timeout is None else seconds_of(timeout, "timeout")
        workflow_priority(priority)
        if isinstance(max_recovery_attempts, bool) or not isinstance(max_recovery_attempts, int):
            raise ConfigurationError("max_recovery_attempts must be an int")
        if max_recovery_attempts < 1:
            raise ConfigurationError("max_recovery_attempts must be at least 1")

        gates = WorkflowGates.of(name or "", concurrency, concurrency_key, throttle)
        if gates.throttle is not None and debounce is not None:
            # A debounced kind's starts begin when its window says: a rate cannot also.
            raise InvalidInputError("throttle does not apply with debounce=")

        def register(body: Callable[..., Awaitable[Any]]) -> Workflow[Any, Any]:
            kind = name if name is not None else _default_name(body, "workflow")
            if kind in self._core.workflows:
                raise ConfigurationError(f"workflow kind {kind!r} is registered twice")
            workflow: Workflow[Any, Any] = Workflow(
                self._core,
                body,
                kind=kind,
                retry=retry,
                timeout=seconds,
                max_recovery_attempts=max_recovery_attempts,
                cron=cron,
                tz=tz,
                debounce=debounce,
                debounce_key=debounce_key,
                gates=dataclasses.replace(gates, kind=kind),
                priority=priority,
            )
            schedule = workflow.schedule()
            if schedule is not None:
                self._add_schedule(schedule)
            self._core.workflows[kind] = workflow
            return workflow

        return register if fn is None else register(fn)

    @overload
    def step(self, fn: Callable[P, Awaitable[R]], /) -> Step[P, R]: ...

    @overload
    def step(self, fn: Callable[P, R], /) -> Step[P, R]: ...

    @overload
    def step(
        self,
        /,
        *,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: Duration | None = None,
    ) -> StepDecorator: ...

    def step(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: Duration | None = None,
    ) -> Any:
        """Register a step, as ``@app.step`` or ``@app.step(name=...)``.

        A step is an ``async def``, or a plain ``def`` run in a thread. Awaited in a
        workflow body, its result is recorded and later passes read the record; anywhere
        else it simply runs. Arguments and result are encoded from the annotations.

        Args:
            fn: The function, when the decorator is used bare.
            name: The name its records are kept under. Default: the function's qualified
                name.
            retry: How its failed attempts are retried (default: one attempt only).
            timeout: A bound on each attempt, in seconds or a timedelta; an attempt past
                it fails with `StepTimeoutError`, which ``retry`` may retry.

        Returns:
            The `Step`; with options alone, a decorator that makes it.

        Raises:
            ConfigurationError: At decoration: a name registered twice, starting with
                ``durably:`` or ``inbox:`` (reserved) or holding ``#``, ``*args`` or
                ``**kwargs``, a parameter annotated as the Context (only a body takes it),
                a missing or unencodable annotation.
            InvalidInputError: A ``timeout`` that is not a positive duration; at
                decoration, a name that is empty, over 400 bytes or not storable text.
        """
        seconds = None if timeout is None else seconds_of(timeout, "timeout")

        def register(function: Callable[..., Any]) -> Step[Any, Any]:
            # A step's default name is its qualified name alone: it keys records, so it
            # stays short and the same whether its module runs as __main__ or is imported.
            step_name = name if name is not None else function.__qualname__
            if step_name in self._core.steps:
                raise ConfigurationError(
                    f"step name {step_name!r} is registered twice (give one of them name=)"
                )
            step: Step[Any, Any] = Step(function, name=step_name, retry=retry, timeout=seconds)
            self._core.steps[step_name] = step
            return step

        return register if fn is None else register(fn)

    @overload
    def task(self, fn: Callable[P, Awaitable[R]], /) -> Task[P, R]: ...

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        retry: Retry | None = None,
        timeout: Duration | None = None,
        dedupe_ttl: Duration = DEFAULT_DEDUPE_TTL,
        **more: object,
    ) -> TaskDecorator: ...

    def task(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        retry: Retry | None = None,
        timeout: Duration | None = None,
        dedupe_ttl: Duration = DEFAULT_DEDUPE_TTL,
        **more: object,
    ) -> Any:
        """Register a task, as ``@app.task`` or ``@app.task(queue=...)``.

        A task is an ``async def`` (or a plain ``def``, run in a thread) whose runs are
        queued with `Task.enqueue` and run by a worker (`serve`, ``durably worker``).
        Arguments are encoded from the annotations, as a workflow's are. Each item carries
        the task's name, its arguments and its retry policy.

        Args:
            fn: The function, when the decorator is used bare.
            name: The name its items are run by. Default: the function's
                ``module.qualname``.
            queue: The work queue its items go to.
            retry: How a failed run is retried (default: 3 attempts, waits from 1 s to
                60 s with full jitter). A `durably.NonRetryable`, or an error of one of
                ``retry.non_retryable``'s types, dead-letters the item at once.
            timeout: A bound on each run, in seconds or a timedelta; a run past it fails
                with `StepTimeoutError` (retried).
            dedupe_ttl: How long a dedupe key outlasts its item (completed or
                dead-lettered), in seconds or a timedelta (default 24 hours, at most a
                year): an enqueue of the key meanwhile is answered with the finished item.
            **more: Flow control and schedule:
                ``concurrency=`` (at most that many runs at once, across workers),
                ``concurrency_key=`` (a callable of the task's arguments answering a
                string: the limit then holds per key), ``throttle=`` (a `durably.Throttle`
                or text like ``"100/minute"``: runs start at most at that rate),
                ``cron=`` (a five-field cron expression: every worker `serve` runs
                enqueues one run per tick, once however many run; a task with one
                ``datetime`` parameter receives the tick's time) and ``tz=`` (the IANA
                time zone of ``cron=``, default UTC).

        Returns:
            The `Task`; with options alone, a decorator that makes it.

        Raises:
            ConfigurationError: At decoration: a default name under ``__main__``, a name
                registered twice (as a task, or a cron task's as a schedule), a cron task
                with parameters other than one ``datetime``, a parameter named ``delay``,
                ``priority``, ``tenant`` or ``dedupe_key``, ``*args`` or ``**kwargs``, a
                missing or unencodable annotation.
            InvalidInputError: A ``queue`` or ``name`` that is not a usable id, a
                ``timeout`` or ``dedupe_ttl`` that is not a positive duration, a
                ``retry`` that is not a `durably.Retry`; at decoration, an unknown option,
                a ``concurrency`` that is not an int from 1, a ``concurrency_key`` that is
                not callable (or without ``concurrency``), a ``throttle`` that does not
                read as a rate, a ``cron`` that does not parse, an unknown ``tz``.
        """
        identifier(queue, "queue")
        if retry is not None and not isinstance(retry, Retry):
            raise InvalidInputError(f"retry must be a durably.Retry, got {type(retry).__name__}")
        options = TaskOptions(
            queue=queue,
            retry=DEFAULT_RETRY if retry is None else retry,
            timeout=None if timeout is None else seconds_of(timeout, "timeout"),
            dedupe_ttl=_dedupe_ttl(dedupe_ttl),
            more=dict(more),
        )

        def register(function: Callable[..., Any]) -> Task[Any, Any]:
            task_name = name if name is not None else _default_name(function, "task")
            if task_name in self._core.tasks:
                raise ConfigurationError(f"task {task_name!r} is registered twice")
            task: Task[Any, Any] = Task(self._core, function, name=task_name, options=options)
            schedule = task.schedule()
            if schedule is not None:
                self._add_schedule(schedule)
            self._core.tasks[task_name] = task
            return task

        return register if fn is None else register(fn)

    @property
    def workflows(self) -> dict[str, Workflow[Any, Any]]:
        """Every registered workflow by kind."""
        return dict(self._core.workflows)

    @property
    def tasks(self) -> dict[str, Task[Any, Any]]:
        """Every registered task by name."""
        return dict(self._core.tasks)

    # --- finding ---------------------------------------------------------------------------

    async def get_handle(self, id: str, tenant: str | None = None) -> WorkflowHandle[Any]:
        """Find an existing workflow of any kind by its id within a tenant.

        A workflow id is unique within its tenant: a workflow of another tenant is never
        found.

        Args:
            id: The workflow's id.
            tenant: The tenant to look in. Default: this App's ``tenant=``; inside a
                workflow (its body or a step), that workflow's.

        Returns:
            Its handle. The result decodes to the return type of the kind this App
            registers, or stays plain JSON data for a kind it does not.

        Raises:
            InvalidInputError: An ``id`` or ``tenant`` that is not usable, or the two too
                long together (before any I/O).
            WorkflowNotFoundError: The tenant has no workflow of this id (never started,
                or swept).
        """
        return await find_handle(self._core, id, tenant)

    # --- schedules -------------------------------------------------------------------------

    def schedule(
        self,
        name: str | Workflow[Any, Any] | Task[Any, Any],
        *,
        cron: str,
        tz: str = "UTC",
        queue: str = DEFAULT_QUEUE,
    ) -> Schedule:
        """Enqueue one item on ``queue``, or start a workflow, at every tick of ``cron``.

        Ticks are wall-clock times in time zone ``tz``. Every worker `serve` runs ticks
        the schedule, and however many run, a tick enqueues once
        (see the flow-control guide). The item's id and dedupe key name the schedule and
        the tick; its payload carries the tick (`durably.engine.tick_of`). Given a
        registered `Workflow`, a tick starts one workflow of its kind instead, as
        ``@app.workflow(cron=...)`` does; given a registered `Task`, a tick queues one run
        of it, as ``@app.task(cron=...)`` does. Register schedules at start-up, in code.

        Args:
            name: The schedule's name, one per App; or a workflow the ticks start, or a
                task they queue (the schedule named after it).
            cron: A five-field cron expression, e.g. ``"*/15 * * * *"``.
            tz: An IANA time zone; ticks are wall-clock times there.
            queue: The queue the tick's items go to (not for a workflow or a task: a
                task's items go to its own queue).

        Raises:
            InvalidInputError: A cron expression that does not parse, an unknown time
                zone, or a bad name or queue (before any I/O).
            ConfigurationError: A schedule of this name is registered already; a workflow
                or task of another App, or whose parameters a tick cannot fill.
        """
        if not isinstance(name, Workflow | Task):  # a name, checked as every id is
            schedule = Schedule(name, cron, tz=tz, queue=queue, tenant=self._core.tenant)
        else:
            registered: object = (
                self._core.workflows.get(name.kind)
                if isinstance(name, Workflow)
                else self._core.tasks.get(name.name)
            )
            known = name.kind if isinstance(name, Workflow) else name.name
            if registered is not name:
                raise ConfigurationError(f"{known!r} is not registered on this App")
            if known in self._core.schedules:
                raise ConfigurationError(f"a schedule named {known!r} is registered already")
            schedule = name.on_cron(cron, tz)
        self._add_schedule(schedule)
        return schedule

    @property
    def schedules(self) -> tuple[Schedule, ...]:
        """Every cron schedule registered (tasks', workflows' and `schedule`'s), in order."""
        return tuple(self._core.schedules.values())

    def _add_schedule(self, schedule: Schedule) -> None:
        if schedule.name in self._core.schedules:
            raise ConfigurationError(f"a schedule named {schedule.name!r} is registered already")
        self._core.schedules[schedule.name] = schedule

    # --- serving ---------------------------------------------------------------------------

    async def serve(
        self,
        workflows: Iterable[str] | None = None,
        queues: Iterable[str] | None = None,
        *,
        concurrency: int = 10,
        grace: Duration = 30.0,
        name: str | None = None,
        poll: Duration = 1.0,
        maintenance: Duration = 5.0,
        signals: bool = True,
    ) -> None:
        """Serve the registered workflows and tasks with a `Worker` until SIGTERM or SIGINT.

        At a stop it claims nothing more, gives in-flight passes ``grace`` to finish and
        gives the rest back (which counts against no recovery limit). While it runs it
        sweeps workflows finished longer than ``retention`` ago, in bounded rounds, and
        logs unfinished workflows whose kind has no body here (`unserved`).

        Args:
            workflows: The kinds to serve (default: every registered kind).
            queues: The task queues to serve (default: every queue a registered task
                uses, when ``workflows`` is not given either). With only ``workflows``
                given, no task queue is served; with only ``queues``, no workflow.
            concurrency: The most passes of one kind, and items of one queue, run at once.
            grace: How long in-flight passes get to finish at a stop.
            name: The worker's name in logs and claims (default ``host:pid:random``).
            poll: The fallback poll period, for wakeups not notified.
            maintenance: The period of the wakeups of due sleepers.
            signals: Whether SIGTERM and SIGINT stop it. In a program that does more than
                serve (``asyncio.create_task(app.serve())`` beside its own work), pass
                False: the signals stay the program's, and cancelling the task stops the
                worker, giving its in-flight passes back.

        An error that stops it is logged (logger ``durably.app``) before it is raised, so
        that a task nobody awaits until later does not hide it.

        Raises:
            ConfigurationError: A kind in ``workflows`` that is not registered, or a
                queue in ``queues`` that no registered task uses.
            InvalidInputError: A ``grace``, ``poll`` or ``maintenance`` that is not a
                positive duration (before any I/O), a ``concurrency`` below 1 or a
                ``name`` that is not a usable id.
        """
        if self._implicit and self._core.dsn.get_secret_value() == DEFAULT_DSN:
            _logger.warning(
                "serving on the implicit default store %s: pass a DSN or set %s",
                DEFAULT_DSN,
                DSN_ENV,
            )
        try:
            await self._driver.serve(
                workflows,
                queues,
                concurrency=concurrency,
                grace=seconds_of(grace, "grace"),
                name=name,
                poll=seconds_of(poll, "poll"),
                maintenance=seconds_of(maintenance, "maintenance"),
                signals=signals,
            )
        except DurablyError as exc:
            # Often run as a task nobody awaits until the end: said here, when it happens
            # (durably's own errors say what to do; a traceback adds nothing to them).
            _logger.error("serve stopped: %s: %s", type(exc).__name__, exc)
            raise
        except Exception:
            _logger.exception("serve stopped on an unexpected error")
            raise

    async def sweep(self, *, limit: int = 500) -> int:
        """Run one bounded round of the retention sweep (what `serve` runs every minute).

        It removes workflows that finished (completed, failed or cancelled) more than
        ``retention`` ago. A swept id can be started afresh; until then its handle's
        `WorkflowHandle.result` raises `WorkflowNotFoundError`.

        Args:
            limit: The most workflows removed in this round.

        Returns:
            The number of workflows removed.

        Raises:
            InvalidInputError: A ``limit`` that is not an int of at least 1.
        """
        return await self._driver.sweep(limit)

    async def unserved(self) -> list[tuple[str, str]]:
        """List unfinished workflows whose kind has no body registered on this App.

        Sleeping, blocked or running workflows nothing here will run. Each call looks at
        the next 100 statuses, round the whole list, and notes in each one's status why it
        stands still. `serve` logs them every minute.

        Returns:
            ``(id, kind)`` pairs.
        """
        return await self._driver.unserved()

    async def run_until_idle(self, *, advance: bool = True) -> int:
        """Run every due workflow and task, one at a time, until nothing is runnable.

        For tests: a day of sleeps, backoffs and delays runs in milliseconds. Each pass
        ticks the cron schedules at the clock's time, as a worker's maintenance does (a
        schedule's first tick only takes its mark; cron ticks are no deadline the clock
        is moved to: advance it past one to fire it).

        Args:
            advance: With a `ManualClock`, move the clock to each next deadline (sleeps,
                backoffs, ``recv`` timeouts, delayed and retried tasks) and go on.

        Returns:
            The number of passes and task runs.

        Raises:
            RuntimeError: Still busy after 100,000 passes (a workflow that never settles).
        """
        return await self._driver.run_until_idle(advance=advance)

    def dashboard(
        self,
        *,
        token: str | None = None,
        allow_actions: bool = False,
        queues: Sequence[str] = ("default",),
        refresh_seconds: float = 2.0,
    ) -> Starlette:
        """Return a web dashboard of this App's stores, an ASGI application to mount.

        Overview, queues with their dead letters, workflows with their timelines, agent
        runs with tokens and cost, refreshed live; it never shows the DSN. Needs the
        ``dashboard`` extra (``pip install 'durably[dashboard]'``).

        Args:
            token: When set, every request must carry it (``?token=`` once, then a
                cookie; or an ``Authorization: Bearer`` header).
            allow_actions: Whether its buttons act (requeue, send, cancel, resume, fork);
                off, every action is refused with 403.
            queues: The work queues it shows.
            refresh_seconds: How often an open page refreshes, 0.5 to 3600.

        Raises:
            InvalidInputError: An empty token, no queue or a bad queue name, or a refresh
                period out of range.
            ImportError: The ``dashboard`` extra is not installed.
        """
        # Imported by name: the dashboard sits above the App (it reads through it).
        site = importlib.import_module("durably.dashboard")
        built: Starlette = site.dashboard(
            self,
            token=token,
            allow_actions=allow_actions,
            queues=queues,
            refresh_seconds=refresh_seconds,
        )
        return built

    # --- stores ----------------------------------------------------------------------------

    async def stores(self) -> Stores:
        """Return the stores, opened on first use.

        The first open creates or migrates the schema (with ``migrate=False``, only
        verifies it). Every App call that does I/O opens them the same way.

        Raises:
            ConfigurationError: The backing is not installed, the database does not exist,
                the login was refused, or the check refuses the store (a schema this
                release cannot use, a server that may lose what it acknowledged).
            StoreUnavailableError: The server cannot be reached.
        """
        return await self._core.stores()

    async def close(self) -> None:
        """Close the stores and the schedulers made over them (idempotent).

        The App opens them again if used later.
        """
        await self._core.close()

    async def __aenter__(self) -> App:
        await self.stores()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        core = getattr(self, "_core", None)  # None while __init__ refuses its arguments
        return f"<durably.App {describe(core.dsn) if core is not None else '(not set up)'}>"


def _dedupe_ttl(value: object) -> float:
    """``dedupe_ttl=`` in seconds: positive, at most a year (`InvalidInputError`)."""
    seconds = dedupe_window(seconds_of(value, "dedupe_ttl"))
    assert seconds is not None
    return seconds


def _limits(limits: object) -> Limits:
    """``limits`` if it is a `Limits` (None: the defaults); `InvalidInputError` otherwise."""
    if limits is None:
        return Limits()
    if not isinstance(limits, Limits):
        raise InvalidInputError(f"limits must be a durably.Limits, got {type(limits).__name__}")
    return limits


def _at_most(value: object, name: str, most: float, words: str) -> float:
    """`seconds_of` ``value``, refused (`InvalidInputError`) above ``most`` seconds.

    ``words`` says ``most`` in the message; an int too large to be a float is refused too.
    """
    limit = f"{name} must be at most {words} ({most:.0f} seconds)"
    if isinstance(value, int) and not isinstance(value, bool) and value > most:
        raise InvalidInputError(f"{limit}, got an int of {value.bit_length()} bits")
    seconds = seconds_of(value, name)
    if seconds > most:
        raise InvalidInputError(f"{limit}, got {value!r}")
    return seconds


def _default_name(fn: Callable[..., Any], what: str) -> str:
    module = getattr(fn, "__module__", None) or "__main__"
    if module == "__main__":
        raise ConfigurationError(
            f"{what} {fn.__qualname__!r} is defined in __main__: give it name= (a script and "
            "a worker importing it would disagree on its default name)"
        )
    return f"{module}.{fn.__qualname__}"


__all__ = ["DEFAULT_DSN", "MAX_LEASE", "MAX_RETENTION", "App", "StepDecorator", "TaskDecorator"]
