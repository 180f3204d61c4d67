"""One replay pass: a registered body run over a copy of a workflow's records, in memory.

The engine's `Execution` over the copy answers recorded calls and refuses the rest: a call
with no record that would act outside the workflow (a step, a child's start, a send, a
cancel) raises `NextCall` before its effect; calls that only keep durably's own records
(the clock, a UUID, ``patched``, a sleep's deadline, a consumed message, an event) are kept
in the copy. Its checkpointer refuses every call, and the body's Context reads no store.
`durably.app.replaying` judges what the pass did.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from durably.app import _layout as layout
from durably.app._context import Context, bind, unbind
from durably.clock import Clock
from durably.engine.runtime import Execution, Parse
from durably.errors import IncompatibleRecordError, ScheduledWakeup, Suspended
from durably.stores.workflows import Checkpointer, Entry, Pass, is_inbox_key
from durably.validation import positive

if TYPE_CHECKING:
    from durably.app._handles import WorkflowHandle
    from durably.app._workflow import Workflow

T = TypeVar("T")

KEPT = (
    f"{layout.PREFIX}now#",
    f"{layout.PREFIX}uuid#",
    f"{layout.PREFIX}patched:",
    f"{layout.PREFIX}sleep#",
    f"{layout.PREFIX}recv:",
    layout.EVENT,
)
"""The keys of calls that act on nothing outside the workflow: a replay that reaches one
with no record keeps its value in the copy and goes on."""
OUTSIDE = (f"{layout.PREFIX}cancel#", f"{layout.PREFIX}resume#")
"""Records supplied from outside a pass (besides messages): they say nothing of how far
the body went."""
QUIET_TURNS = 20
"""Event-loop turns without a durable call after which the body's branches count as all
stopped or waiting (a replayed call answers without yielding)."""
MAX_KEPT = 10_000
"""Calls with no record a replay keeps in its copy before it calls the body runaway."""
MAX_ROUNDS = 10_000
"""Times the replay lets held branches go on before it calls the body runaway."""
OUTSIDE_WAIT = 5.0
"""Seconds (real time) a replay waits for a body that awaits something no durable call
answers (a timer or I/O outside a step) before cancelling it."""


class NextCall(Suspended):
    """The replay reached a call with no record that would act outside the workflow.

    Its branch stops there, unrun.
    """


# --- held branches ------------------------------------------------------------------------


class Holds:
    """Where the body's branches wait before a call with no record, until all stop or wait.

    So one branch's stop never cuts a sibling short of the records it would still read,
    as a fresh step that takes time lets its siblings go on in a worker's pass.
    """

    def __init__(self) -> None:
        self.activity = 0
        self._held: list[asyncio.Future[None]] = []

    def touch(self) -> None:
        self.activity += 1

    async def hold(self) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._held.append(future)
        self.activity += 1
        await future

    async def quiet(self) -> None:
        """Return once `QUIET_TURNS` loop turns pass without a durable call or a hold."""
        while True:
            seen = self.activity
            for _ in range(QUIET_TURNS):
                await asyncio.sleep(0)
            if self.activity == seen:
                return

    def release(self) -> bool:
        """Let every held branch go on; whether any was held."""
        held, self._held = self._held, []
        for future in held:
            if not future.done():
                future.set_result(None)
        if held:
            self.activity += 1
        return bool(held)


class _HoldBeforeFresh:
    """The pass's look for a cancel before each fresh call, used as the place to hold."""

    def __init__(self, holds: Holds) -> None:
        self._holds = holds

    def due(self, workflow: str) -> bool:
        return True

    async def arrived(self, workflow: str, marker: str) -> bool:
        await self._holds.hold()
        return False  # a cancel is in the records or nowhere


class _Refusing:
    """The checkpointer of a replay: every call is refused (a replay writes nothing)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"a replay never touches a store (it called {name!r})")


class _Quiet(logging.LoggerAdapter):  # type: ignore[type-arg]
    """The body's ``ctx.logger`` in a replay: drops everything."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        return None


def _same(value: object) -> Any:
    return value


class ReplayExecution(Execution):
    """An `Execution` over records in memory that never runs or records an outside call."""

    def __init__(self, key: str, records: dict[str, object], clock: Clock, holds: Holds) -> None:
        super().__init__(Pass(key, 0), _refusing(), records, clock)
        self._holds = holds
        self.positions = {name: index for index, name in enumerate(records)}
        """Each recorded key's place in the history."""
        self._last_body_record = max(
            (
                index
                for name, index in self.positions.items()
                if not is_inbox_key(name) and not name.startswith(OUTSIDE)
            ),
            default=-1,
        )
        self.fresh: list[str] = []
        """Keys of the outside calls with no record the replay stopped at, in order."""
        self.order: list[str] = []
        """Recorded keys the body's own task read, in the order it read them."""
        self.touched: set[str] = set()
        """Every key the body called, with a record or without."""
        self.body: asyncio.Task[Any] | None = None
        self._kept = 0

    def reserve(self, key: str, task: asyncio.Task[Any] | None = None) -> bool:
        self._read(key)
        if super().reserve(key, task):
            return True
        raise self._stop(key)  # a step with no record: never run

    async def commit(self, key: str, value: object) -> object:
        raise self._stop(key)  # unreachable: `reserve` stops first

    async def step(
        self, key: str, effect: Callable[[], Awaitable[object] | object], parse: Parse[T] = _same
    ) -> T:
        self._read(key)
        self._use(key)
        if key in self._records:
            self.replayed += 1
            return parse(self._records[key])
        if not key.startswith(KEPT):
            await self._holds.hold()
            raise self._stop(key)
        value = effect()
        if inspect.isawaitable(value):
            value = await value
        self._keep(key, value)
        return parse(value)

    async def transact(self, key: str, effect: object, parse: Parse[T] = _same) -> T:
        self._read(key)
        if key not in self._records:
            self._use(key)
            await self._holds.hold()
            raise self._stop(key)
        return await super().transact(key, effect, parse)

    async def sleep(self, key: str, duration: float) -> None:
        seconds = positive(duration, "duration")
        await self._sleep(key, lambda: self._clock.now() + seconds)

    async def sleep_until(self, key: str, deadline: float) -> None:
        """`sleep` to a deadline (the form later releases of the engine call)."""
        await self._sleep(key, lambda: deadline)

    async def receive(
        self, key: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Entry]:
        self._read(key)
        if key not in self._records:
            self._use(key)
            raise self._stop(key)
        return await super().receive(key, after=after, limit=limit)

    async def _sleep(self, key: str, deadline: Callable[[], float]) -> None:
        self._read(key)
        self._use(key)
        if key in self._records:
            self.replayed += 1
        else:
            self._keep(key, deadline())
        due = float(self._records[key])  # type: ignore[arg-type]
        # The history going on after a recorded sleep shows its deadline passed.
        went_on = self.positions.get(key, self._last_body_record) < self._last_body_record
        if due > self._clock.now() and not went_on:
            wakeup = ScheduledWakeup(key, due)
            self._suspensions.append(wakeup)
            raise wakeup

    def _read(self, key: str) -> None:
        self._holds.touch()
        self.touched.add(key)
        if key in self.positions and asyncio.current_task() is self.body:
            self.order.append(key)

    def _keep(self, key: str, value: object) -> None:
        self._kept += 1
        if self._kept > MAX_KEPT:
            raise Runaway(key)
        self._records[key] = value

    def _stop(self, key: str) -> NextCall:
        if key not in self.fresh:
            self.fresh.append(key)
        return NextCall(key)


def _refusing() -> Checkpointer[Any]:
    refusing: Any = _Refusing()
    return refusing  # type: ignore[no-any-return]


class Runaway(Suspended):
    """The body went on past `MAX_KEPT` calls with no record (a loop that never ends)."""


class ReplayContext(Context):
    """The body's Context in a replay: no store is read, and its logger is quiet.

    A child whose end the parent has not recorded is waited for, as its records are not
    read.
    """

    def __init__(
        self,
        run: ReplayExecution,
        start: Mapping[str, Any],
        workflow: Workflow[Any, Any],
        holds: Holds,
    ):
        super().__init__(
            run,
            start,
            workflow.kind,
            cancels=_HoldBeforeFresh(holds),
            encode_args=workflow.signature.encode_args,
        )
        self._holds = holds

    async def _ending_of(self, child: WorkflowHandle[Any]) -> dict[str, object] | None:
        await self._holds.hold()
        return None

    @functools.cached_property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        return _Quiet(logging.getLogger(f"durably.workflow.{self._kind}"))


# --- one pass -------------------------------------------------------------------------------


class ReplayPass:
    """One replay of one workflow.

    The body runs as a task; its held branches are let go on in rounds until each has
    stopped, waits or ended.
    """

    def __init__(
        self,
        workflow: Workflow[Any, Any],
        key: str,
        records: dict[str, object],
        start: Mapping[str, Any],
        clock: Clock,
    ) -> None:
        self.workflow = workflow
        self.records = dict(records)
        """The history as it was stored (the run's copy gains what the replay keeps)."""
        self.start = start
        self.holds = Holds()
        self.execution = ReplayExecution(key, records, clock, self.holds)
        self.ctx: ReplayContext | None = None
        self.returned = False
        self.value: object = None
        self.raised: BaseException | None = None
        self.stuck: str | None = None
        """Why the replay gave up on the body, if it did."""

    async def run(self) -> None:
        task = asyncio.get_running_loop().create_task(self._body())
        try:
            await self._settle(task)
        finally:
            if not task.done():  # the replay itself was cancelled: the body goes too
                task.cancel()

    async def _settle(self, task: asyncio.Task[None]) -> None:
        """Let held branches go on, round by round, until the body ended and none waits."""
        loop = asyncio.get_running_loop()
        rounds = 0
        waiting_since: float | None = None
        while True:
            await self.holds.quiet()
            if self.holds.release():
                rounds += 1
                waiting_since = None
                if rounds > MAX_ROUNDS and self.stuck is None:
                    self.stuck = f"it went on past {MAX_ROUNDS} rounds of calls with no record"
                    task.cancel()
                continue
            if task.done():
                task.result()  # the body's own outcome is kept; this raises only a bug here
                return
            # Nothing held and the body not done: it awaits something no durable call
            # answers (a timer or I/O outside a step).
            now = loop.time()
            if waiting_since is None:
                waiting_since = now
            elif now - waiting_since > OUTSIDE_WAIT and self.stuck is None:
                self.stuck = (
                    f"it awaited something outside durably for {OUTSIDE_WAIT:g}s (a timer "
                    "or I/O outside a step, which a pass must not do)"
                )
                task.cancel()
            await asyncio.wait({task}, timeout=0.01)

    async def _body(self) -> None:
        # Made inside the body's task, which the Context takes as the body's own.
        self.execution.body = asyncio.current_task()
        ctx = self.ctx = ReplayContext(self.execution, self.start, self.workflow, self.holds)
        try:
            positional, keywords = self.workflow.arguments(ctx.id, self.start)
        except IncompatibleRecordError as exc:
            self.raised = exc
            return
        token = bind(ctx)
        try:
            self.value = await self.workflow.fn(ctx, *positional, **keywords)
            self.returned = True
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            self.raised = exc
        finally:
            unbind(token)


__all__ = [
    "KEPT",
    "MAX_KEPT",
    "MAX_ROUNDS",
    "OUTSIDE",
    "OUTSIDE_WAIT",
    "QUIET_TURNS",
    "Holds",
    "NextCall",
    "ReplayContext",
    "ReplayExecution",
    "ReplayPass",
    "Runaway",
]
