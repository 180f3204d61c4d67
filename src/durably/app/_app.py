"""`App`: the application layer over one backing's stores: registers workflows and steps,
starts them, finds their handles, and serves them with the engine's `Worker`."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

from pydantic import SecretStr

from durably.app._context import Context
from durably.app._core import Core
from durably.app._driving import Driver
from durably.app._handles import WorkflowHandle, find_handle
from durably.app._retry import Retry
from durably.app._steps import Step
from durably.app._values import Duration, seconds_of
from durably.app._workflow import Workflow
from durably.clock import Clock, SystemClock
from durably.errors import ConfigurationError, InvalidInputError
from durably.stores.dsn import DSN_ENV, describe, parse, redacted
from durably.stores.opening import Stores
from durably.validation import identifier

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


_logger = logging.getLogger("durably.app")


class App:
    """Workflows and steps over the stores one DSN names (``sqlite:///file.db``,
    ``postgresql://...``, ``redis://...``, ``memory://``).

    ``dsn=None`` reads ``$DURABLY_DSN``, else ``sqlite:///durably.db``; a `SecretStr` is
    taken too, and the DSN is kept as one (`dsn` shows it with the password masked). On
    PostgreSQL and Redis, ``?pool_size=N`` and ``?pool_timeout=S`` size the connection
    pool and its wait (see `durably.open_stores`). The stores open lazily on first use
    (creating or migrating the schema; ``migrate=False`` only verifies it); close them
    with ``await app.close()`` or ``async with app:``.
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
        dsn: str | SecretStr | None = None,
        *,
        clock: Clock | None = None,
        tenant: str = "default",
        retention: Duration = timedelta(days=7),
        migrate: bool = True,
        lease: Duration = 30.0,
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
        )
        self._driver = Driver(self._core)

    @property
    def dsn(self) -> str:
        """The DSN this App's stores open from, its password masked as ``***`` (safe to
        print and log)."""
        return redacted(self._core.dsn)

    @dsn.setter
    def dsn(self, dsn: str | SecretStr) -> None:
        """Open the stores from ``dsn`` instead (as ``durably worker --dsn`` does): only
        before they are open. `DsnError` for a malformed DSN, `RuntimeError` once open."""
        if self._core.opened:
            raise RuntimeError("the App's stores are open: set its DSN before first use")
        secret = dsn if isinstance(dsn, SecretStr) else SecretStr(dsn)
        parse(secret)
        self._core.dsn = secret
        self._implicit = False

    @property
    def clock(self) -> Clock:
        """The clock workflows read (``ctx.now()``) and sleep by."""
        return self._core.clock

    @property
    def tenant(self) -> str:
        """The tenant a workflow started without ``tenant=`` belongs to."""
        return self._core.tenant

    @property
    def retention(self) -> float:
        """Seconds a finished workflow is kept before `serve` sweeps it."""
        return self._core.retention

    @property
    def lease(self) -> float:
        """Seconds a dead worker's pass keeps its workflow before another takes over."""
        return self._core.lease

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
            if kind in self._core.workflows:
                raise ConfigurationError(f"workflow kind {kind!r} is registered twice")
            workflow: Workflow[Any, Any] = Workflow(
                self._core,
                body,
                kind=kind,
                retry=retry,
                timeout=seconds,
                max_recovery_attempts=max_recovery_attempts,
            )
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
            if step_name in self._core.steps:
                raise ConfigurationError(
                    f"step name {step_name!r} is registered twice (give one of them name=)"
                )
            step: Step[Any, Any] = Step(function, name=step_name, retry=retry, timeout=seconds)
            self._core.steps[step_name] = step
            return step

        return register if fn is None else register(fn)

    @property
    def workflows(self) -> dict[str, Workflow[Any, Any]]:
        """Every registered workflow by kind."""
        return dict(self._core.workflows)

    # --- finding ---------------------------------------------------------------------------

    async def get_handle(self, id: str) -> WorkflowHandle[Any]:
        """The handle of existing workflow ``id`` (of any kind; its result decoded with the
        registered kind's return type when this App has it); `WorkflowNotFoundError`."""
        return await find_handle(self._core, id)

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
        if self._implicit and self._core.dsn.get_secret_value() == DEFAULT_DSN:
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
        return await self._core.stores()

    async def close(self) -> None:
        """Close the stores and the schedulers made over them (idempotent); the App opens
        them again if used later."""
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
