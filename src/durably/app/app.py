"""`App`: the application layer over one backing's stores: registers workflows and steps,
starts them, finds their handles, and serves them with the engine's `Worker`."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

from durably.app import records
from durably.app.cancels import Cancels
from durably.app.context import Context
from durably.app.driving import Driver
from durably.app.handles import WorkflowHandle
from durably.app.retry import Retry
from durably.app.steps import Step
from durably.app.values import ANY, Duration, seconds_of
from durably.app.workflow import Workflow
from durably.clock import Clock, SystemClock
from durably.dsn import DSN_ENV, describe, parse
from durably.errors import ConfigurationError, InvalidInputError, WorkflowNotFoundError
from durably.status import WorkflowStatus
from durably.stores import Stores, open_stores
from durably.validation import identifier
from durably.workflows import Durable, Pass

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_DSN = "sqlite:///durably.db"
CLAIM_WAIT = 5.0
"""How long `resume` and a parked workflow's cancel wait for a claim another worker holds
(seconds of real time)."""
CLAIM_PAUSE = 0.05
MAX_RETENTION = 100 * 365.25 * 86400.0
"""The longest ``retention=`` an App takes, in seconds: 100 years. Longer is "for ever" in
practice, and past about 2,000 years the sweep's cut-off (now minus retention) is not
even a date: the sweep would fail on every round."""
MAX_LEASE = 3600.0
"""The longest ``lease=`` an App takes, in seconds: one hour, the claim budget of one pass
(`durably.Worker`'s default ``budget``, which the App serves with): a claim never outlives
it, so a longer lease would only delay taking over a dead worker's workflow."""


class StepDecorator(Protocol):
    """What ``@app.step(...)`` with options returns: registers an async or plain step."""

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> Step[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> Step[P, R]: ...


_logger = logging.getLogger("durably.app")


class App:
    """Workflows and steps over the stores one DSN names (``sqlite:///file.db``,
    ``postgresql://...``, ``redis://...``, ``memory://``).

    ``dsn=None`` reads ``$DURABLY_DSN``, else ``sqlite:///durably.db``. The stores open
    lazily on first use (creating or migrating the schema; ``migrate=False`` only
    verifies it); close them with ``await app.close()`` or ``async with app:``.
    ``retention`` is how long finished workflows are kept (and their ids stay
    idempotent) before `serve` sweeps them, at most `MAX_RETENTION` (100 years).
    ``lease`` is how long a pass whose worker died keeps its workflow before another
    worker takes it over (a live pass renews it), at most `MAX_LEASE` (one hour).
    ``clock`` (default `SystemClock`) is any `durably.Clock`.

    Raises `DsnError` before any I/O for a malformed DSN (an empty string included), and
    `InvalidInputError` for a bad tenant, clock, ``retention`` or ``lease``.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        clock: Clock | None = None,
        tenant: str = "default",
        retention: Duration = timedelta(days=7),
        migrate: bool = True,
        lease: Duration = 30.0,
    ) -> None:
        # Only ``dsn=None`` means "the default": an explicit "" is a mistake, not a wish.
        self._implicit = dsn is None and not os.environ.get(DSN_ENV)
        self.dsn = (os.environ.get(DSN_ENV) or DEFAULT_DSN) if dsn is None else dsn
        parse(self.dsn)  # a malformed DSN fails here (DsnError), not at first use
        # Clock is a runtime-checkable protocol, so a class (``ManualClock`` without its
        # parentheses) would pass for an instance: refused too.
        if clock is not None and (isinstance(clock, type) or not isinstance(clock, Clock)):
            raise InvalidInputError(
                "clock must be a durably.Clock instance (now() and sleep()), got "
                f"{clock.__name__ if isinstance(clock, type) else type(clock).__name__}"
            )
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.tenant = identifier(tenant, "tenant")
        self.retention = _at_most(retention, "retention", MAX_RETENTION, "100 years")
        self.lease = _at_most(lease, "lease", MAX_LEASE, "one hour")
        self._migrate = migrate
        self._workflows: dict[str, Workflow[Any, Any]] = {}
        self._steps: dict[str, Step[Any, Any]] = {}
        self._stores: Stores | None = None
        self._opening: asyncio.Lock | None = None
        self._durables: dict[str, Durable[Any]] = {}
        self._driver = Driver(self)
        self.cancels = Cancels(self)
        """What running passes ask whether a cancel arrived since they began."""

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
    ) -> Any:
        """Register an ``async def`` workflow body whose first parameter is the
        `durably.Context`. Its kind is ``name`` or ``module.qualname``.

        Raises `ConfigurationError` at decoration for a default kind under ``__main__``, a
        kind registered twice, a parameter named ``id``/``tenant``/``timeout``, or a
        missing or unencodable annotation.
        """
        seconds = None if timeout is None else seconds_of(timeout, "timeout")
        if isinstance(max_recovery_attempts, bool) or not isinstance(max_recovery_attempts, int):
            raise ConfigurationError("max_recovery_attempts must be an int")
        if max_recovery_attempts < 1:
            raise ConfigurationError("max_recovery_attempts must be at least 1")

        def register(body: Callable[..., Awaitable[Any]]) -> Workflow[Any, Any]:
            kind = name if name is not None else _default_name(body, "workflow")
            if kind in self._workflows:
                raise ConfigurationError(f"workflow kind {kind!r} is registered twice")
            workflow: Workflow[Any, Any] = Workflow(
                self,
                body,
                kind=kind,
                retry=retry,
                timeout=seconds,
                max_recovery_attempts=max_recovery_attempts,
            )
            self._workflows[kind] = workflow
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
        """Register a step (``async def``, or plain ``def`` run in a thread). Awaited in a
        workflow body its result is recorded; elsewhere it just runs. ``retry`` opts in to
        retries (default: one attempt); ``timeout`` bounds each attempt.

        Raises `ConfigurationError` for a step name registered twice or a missing or
        unencodable annotation.
        """
        seconds = None if timeout is None else seconds_of(timeout, "timeout")

        def register(function: Callable[..., Any]) -> Step[Any, Any]:
            # A step's default name is its qualified name alone: it keys records, so it
            # stays short and the same whether its module runs as __main__ or is imported.
            step_name = name if name is not None else function.__qualname__
            if step_name in self._steps:
                raise ConfigurationError(
                    f"step name {step_name!r} is registered twice (give one of them name=)"
                )
            step: Step[Any, Any] = Step(function, name=step_name, retry=retry, timeout=seconds)
            self._steps[step_name] = step
            return step

        return register if fn is None else register(fn)

    @property
    def workflows(self) -> dict[str, Workflow[Any, Any]]:
        """Every registered workflow by kind."""
        return dict(self._workflows)

    # --- finding ---------------------------------------------------------------------------

    async def get_handle(self, id: str) -> WorkflowHandle[Any]:
        """The handle of existing workflow ``id`` (of any kind; its result decoded with the
        registered kind's return type when this App has it); `WorkflowNotFoundError`."""
        identifier(id, "id")
        stored = await (await self.stores()).checkpointer.load(id)
        start = stored.get(records.START)
        if not isinstance(start, dict):
            raise WorkflowNotFoundError(id)
        kind = str(start.get("kind"))
        registered = self._workflows.get(kind)
        result = registered.signature.result if registered is not None else ANY
        return WorkflowHandle(self, id, kind, result, False)

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
        """Serve every registered workflow kind (or only the kinds named) with a `Worker`,
        at most ``concurrency`` passes per kind at once, until SIGTERM/SIGINT; then stop
        claiming, give in-flight passes ``grace`` to finish and give the rest back
        (which counts against no recovery limit). ``queues`` is reserved for the task
        queues of a later release (naming any is refused today). Sweeps finished
        workflows older than ``retention`` in bounded rounds while it runs. ``name`` names
        the worker in logs and claims (default host:pid:random); ``poll`` is its fallback
        poll period and ``maintenance`` the period of its wakeups of due sleepers
        (`Worker`).

        In a program that does more than serve (``asyncio.create_task(app.serve())``
        beside its own work), pass ``signals=False``: the signals stay the program's (a
        Ctrl-C interrupts it as usual) and cancelling the task stops the worker, giving
        its in-flight passes back."""
        if self._implicit and self.dsn == DEFAULT_DSN:
            _logger.warning(
                "serving on the implicit default store %s: pass a DSN or set %s",
                DEFAULT_DSN,
                DSN_ENV,
            )
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

    async def sweep(self, *, limit: int = 500) -> int:
        """One bounded round of the retention sweep (what `serve` runs every minute):
        remove up to ``limit`` workflows that finished (completed, failed or cancelled)
        more than ``retention`` ago; the number removed. A swept id can be started
        afresh; its handle's `result` raises `WorkflowNotFoundError`."""
        return await self._driver.sweep(limit)

    async def unserved(self) -> list[tuple[str, str]]:
        """Unfinished workflows (sleeping, blocked or running) whose kind has no body
        registered on this App, as ``(id, kind)``; each call looks at the next 100
        statuses, round the whole list. `serve` logs them every minute."""
        return await self._driver.unserved()

    async def run_until_idle(self, *, advance: bool = True) -> int:
        """Run every due workflow until nothing is runnable; with ``advance`` and a
        `ManualClock`, move the clock to each next deadline (sleeps, backoffs, recv
        timeouts) and go on. Returns the number of passes run. For tests."""
        return await self._driver.run_until_idle(advance=advance)

    # --- stores ----------------------------------------------------------------------------

    async def stores(self) -> Stores:
        """The stores, opened (and the schema made ready) on first use."""
        if self._stores is not None:
            return self._stores
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._stores is None:
                stores = await open_stores(self.dsn, clock=self.clock)
                try:
                    await (stores.migrate() if self._migrate else stores.verify())
                except BaseException:
                    await stores.close()
                    raise
                _logger.info("opened %s", describe(self.dsn))
                self._stores = stores
        return self._stores

    def durable(self, kind: str) -> Durable[Any]:
        """The `Durable` whose scheduler serves workflow kind ``kind`` (stores open)."""
        if self._stores is None:
            raise RuntimeError("the App's stores are not open yet")
        durable = self._durables.get(kind)
        if durable is None:
            durable = self._stores.durable(kind, lease=self.lease)
            self._durables[kind] = durable
        return durable

    async def resume(self, id: str, kind: str) -> bool:
        """Open a new generation of workflow ``id`` (a cancel from before no longer
        applies), reset its status and make it ready; False when a concurrent resume
        opened it first (nothing changes then)."""
        stores = await self.stores()
        checkpointer = stores.checkpointer
        stored = await checkpointer.load(id)
        marker = records.occurrence(records.RESUMES, records.generation(stored) + 1)
        # A marker of this call's own, so only the resume whose marker landed goes on.
        if not (await checkpointer.supply(id, marker, uuid.uuid4().hex)).first:
            return False
        holder = await self._claim_briefly(id)
        if holder is not None:
            try:
                await checkpointer.set_status(holder, WorkflowStatus.PENDING)
            finally:
                await checkpointer.release(holder)
        await self.durable(kind).scheduler.make_ready(id)
        return True

    async def end_parked(self, id: str, generation: int) -> None:
        """End parked workflow ``id`` cancelled (a cancel asked while it was parked: no
        pass will run to see it), as its body's cancelled end would: the record of the
        end, then the status. Resumable, as any cancelled workflow."""
        checkpointer = (await self.stores()).checkpointer
        ended = records.occurrence(records.CANCELLED, generation)
        await checkpointer.supply(id, ended, "cancelled")
        holder = await self._claim_briefly(id)
        if holder is None:
            return  # a pass holds it after all (a resume raced this): it sees the cancel
        try:
            info = await checkpointer.get_status(id)
            if info is not None and info.status is WorkflowStatus.PARKED:
                await checkpointer.set_status(
                    holder, WorkflowStatus.CANCELLED, attempts=info.attempts, error="cancelled"
                )
        finally:
            await checkpointer.release(holder)

    async def _claim_briefly(self, id: str) -> Pass | None:
        """A claim on workflow ``id`` for a status change made outside a pass, waiting up
        to `CLAIM_WAIT` seconds for one: a worker that took a delivery of a parked
        workflow holds the claim only while it reads the status. None when a pass holds
        it all that time (a running pass, which reports its own status)."""
        checkpointer = (await self.stores()).checkpointer
        waited = 0.0
        while True:
            holder = await checkpointer.claim(id, 30.0, 30.0)
            if holder is not None or waited >= CLAIM_WAIT:
                return holder
            await asyncio.sleep(CLAIM_PAUSE)
            waited += CLAIM_PAUSE

    async def close(self) -> None:
        """Close the stores and the schedulers made over them (idempotent); the App opens
        them again if used later."""
        stores, self._stores = self._stores, None
        self._durables = {}
        if stores is not None:
            await stores.close()  # closes every `Stores.durable` scheduler first

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
        return f"<durably.App {describe(self.dsn)}>"


def _at_most(value: object, name: str, most: float, words: str) -> float:
    """`seconds_of` ``value``, refused (`InvalidInputError`) above ``most`` seconds (said
    as ``words`` in the message), also when it is an int too large to be a float."""
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


__all__ = ["DEFAULT_DSN", "MAX_LEASE", "MAX_RETENTION", "App", "StepDecorator"]
