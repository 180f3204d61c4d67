"""Replaying a registered workflow body against a workflow's records, without side effects.

What `durably.testing.replay` is built on. One pass of the body the App registers now runs
over a copy of the records, in memory; no store is opened and nothing is written anywhere.
Recorded calls answer from the records (checked as a worker's pass checks them: arguments'
digests, types). The first call with no record that would act outside the workflow (a
step, a child's start, a send, a cancel) stops its branch there, unrun. Calls whose record
is the App's own bookkeeping (the clock, a UUID, ``patched``, a sleep's deadline, a
consumed message, an event) are kept in the copy and the replay goes on.

The report says how the replay ended and whether the body still fits the records: step
calls with other arguments, records the body no longer reaches or reads in another order,
recorded values that no longer validate, a body that now fails, a finished workflow that
now ends otherwise.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from durably.app import _layout as layout
from durably.app import _tenancy as tenancy
from durably.app._context import Context, bind, unbind
from durably.clock import Clock
from durably.engine.runtime import Execution, Parse
from durably.errors import (
    IncompatibleRecordError,
    InputNeeded,
    MessageNeeded,
    NondeterminismError,
    ScheduledWakeup,
    StrayCancellationError,
    Suspended,
    WorkflowStopped,
)
from durably.redaction import mend_text
from durably.stores.codec import JsonCodec
from durably.stores.workflows import Checkpointer, Entry, Pass, is_inbox_key
from durably.validation import positive

if TYPE_CHECKING:
    from durably.app._app import App
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


class Finding(StrEnum):
    """What a replay found: ``ok``, or why the code deployed now does not fit the history."""

    OK = "ok"
    ARGUMENT_DRIFT = "argument drift"
    """A step is called with other arguments than the recorded call at its key."""
    STEP_DRIFT = "step drift"
    """The body calls other steps than the recorded ones, or in another order: a step
    replaced, inserted, removed or reordered under the workflow."""
    RESULT_DRIFT = "result drift"
    """The history completed; the body now returns another result."""
    INCOMPATIBLE_RECORD = "incompatible record"
    """A recorded value (arguments, a step's result, a message) no longer validates."""
    BODY_FAILED = "body failed"
    """The body raises where the history did not fail so (or awaits something outside
    durably, or never settles)."""
    NO_BODY = "no body"
    """The App registers no body for the workflow's kind, or it has no start record."""


@dataclass(frozen=True, slots=True)
class WorkflowReplay:
    """How one workflow's history replayed against the code deployed now.

    Attributes:
        tenant: The workflow's tenant.
        workflow: Its id.
        kind: Its kind, as its start recorded it (None without a start record).
        finding: `Finding.OK`, or what does not fit.
        detail: One sentence on the finding.
        ending: How the replay ended: ``completed``, ``failed: …``, ``cancelled``,
            ``waits …``, ``would run … next``, ``parked: …`` or ``not run``.
        next_calls: The keys of the calls with no record the replay stopped at: what a
            worker would run next.
        unread: Recorded keys the body never reached, in recorded order.
        replayed: Calls answered from the record.
        error: The error behind the finding, when there is one.
    """

    tenant: str
    workflow: str
    kind: str | None
    finding: Finding
    detail: str
    ending: str
    next_calls: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()
    replayed: int = 0
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        """Whether the code deployed now fits this history."""
        return self.finding is Finding.OK

    def describe(self) -> str:
        """One line for people: the workflow, the finding and how the replay ended."""
        where = "" if self.tenant == tenancy.DEFAULT_TENANT else f" of tenant {self.tenant!r}"
        head = f"workflow {self.workflow!r}{where} (kind {self.kind!r})"
        if self.ok:
            return f"ok: {head}: {self.ending}"
        return f"{self.finding.value}: {head}: {self.detail}"


class NextCall(Suspended):
    """The replay reached a call with no record that would act outside the workflow.

    Its branch stops there, unrun.
    """


async def replay_workflow(
    app: App, key: str, records: Mapping[str, object], *, clock: Clock | None = None
) -> WorkflowReplay:
    """Replay the workflow stored under ``key`` with ``records`` against ``app``'s bodies.

    Args:
        app: The App whose registered bodies run (its stores are never opened).
        key: The store's key of the workflow (its id, in the default tenant).
        records: Every record of the workflow, in recorded order. Not changed.
        clock: The time the replay runs at (default: the App's clock): a recorded sleep
            whose deadline is ahead of it, and after which the history records nothing
            more, is where the workflow waits.

    Returns:
        The report of this workflow.
    """
    copy = dict(records)
    start = copy.get(layout.START)
    tenant, id = tenancy.scope(key, start if isinstance(start, dict) else None)
    kind = layout.recorded_kind(copy)
    if not isinstance(start, dict):
        return WorkflowReplay(
            tenant,
            id,
            kind,
            Finding.NO_BODY,
            "no start record: not started by durably.App",
            "not run",
        )
    workflow = app.workflows.get(kind) if kind is not None else None
    if workflow is None:
        return WorkflowReplay(
            tenant,
            id,
            kind,
            Finding.NO_BODY,
            f"this App registers no body for kind {kind!r}",
            "not run",
        )
    replay = _Replay(workflow, key, copy, start, clock if clock is not None else app.clock)
    await replay.run()
    return _judged(replay, WorkflowReplay(tenant, id, kind, Finding.OK, "", ""))


# --- held branches ------------------------------------------------------------------------


class _Holds:
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

    def __init__(self, holds: _Holds) -> None:
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


class _ReplayExecution(Execution):
    """An `Execution` over records in memory that never runs or records an outside call."""

    def __init__(self, key: str, records: dict[str, object], clock: Clock, holds: _Holds) -> None:
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

    def reserve(self, key: str) -> bool:
        self._read(key)
        if super().reserve(key):
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
            raise _Runaway(key)
        self._records[key] = value

    def _stop(self, key: str) -> NextCall:
        if key not in self.fresh:
            self.fresh.append(key)
        return NextCall(key)


def _refusing() -> Checkpointer[Any]:
    refusing: Any = _Refusing()
    return refusing  # type: ignore[no-any-return]


class _Runaway(Suspended):
    """The body went on past `MAX_KEPT` calls with no record (a loop that never ends)."""


class _ReplayContext(Context):
    """The body's Context in a replay: no store is read, and its logger is quiet.

    A child whose end the parent has not recorded is waited for, as its records are not
    read.
    """

    def __init__(self, run: _ReplayExecution, start: Mapping[str, Any], kind: str, holds: _Holds):
        super().__init__(run, start, kind, cancels=_HoldBeforeFresh(holds))
        self._holds = holds

    async def _ending_of(self, child: WorkflowHandle[Any]) -> dict[str, object] | None:
        await self._holds.hold()
        return None

    @functools.cached_property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        return _Quiet(logging.getLogger(f"durably.workflow.{self._kind}"))


# --- one replay -----------------------------------------------------------------------------


class _Replay:
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
        self.holds = _Holds()
        self.execution = _ReplayExecution(key, records, clock, self.holds)
        self.ctx: _ReplayContext | None = None
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
        ctx = self.ctx = _ReplayContext(self.execution, self.start, self.workflow.kind, self.holds)
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


# --- judging ----------------------------------------------------------------------------------


def _judged(replay: _Replay, report: WorkflowReplay) -> WorkflowReplay:
    """``report`` with what ``replay`` found.

    The first of: a body given up on, a parked pass, a failure the history does not
    have, reads in another order, unread records, a finished history the body no longer
    ends like.
    """
    run, ctx = replay.execution, replay.ctx
    leaves = _leaves(replay.raised) if replay.raised is not None else []
    unread = _unread(ctx._unmet if ctx is not None else set(), run)
    ended = layout.ending(replay.records)
    ending = _ending(replay, leaves)

    def found(finding: Finding, detail: str, error: BaseException | None = None) -> WorkflowReplay:
        return _with(report, finding, detail, ending, run, unread, error)

    if replay.stuck is not None:
        return found(Finding.BODY_FAILED, f"the replay gave up on the body: {replay.stuck}")
    stopped = ctx._stopped if ctx is not None else None
    if stopped is None:
        stopped = next((leaf for leaf in leaves if isinstance(leaf, WorkflowStopped)), None)
    if stopped is not None and stopped.status == "parked":
        return found(_stop_finding(stopped, replay.records), str(stopped), stopped)
    runaway = next((leaf for leaf in leaves if isinstance(leaf, _Runaway)), None)
    if runaway is not None:
        return found(
            Finding.BODY_FAILED,
            f"the body went on past {MAX_KEPT} calls with no record (a loop that never ends?)",
        )
    failure = _failure(replay, leaves)
    if failure is not None and not (ended is not None and ended.get("e") == _failure_text(failure)):
        where = f"; the history ended {ended['e']!r}" if ended is not None and "e" in ended else ""
        return found(Finding.BODY_FAILED, f"the body raises {failure!r}{where}", failure)
    if replay.returned and (run.suspensions or run.fresh):
        return found(
            Finding.BODY_FAILED,
            "the body caught the replay's stop at a call with no record and returned "
            "(an except BaseException or a bare except around a durable call)",
        )
    reordered = _reordered(run.order, run.positions)
    if reordered is not None:
        return found(Finding.STEP_DRIFT, reordered)
    if unread:
        first = unread[0]
        if run.fresh:
            detail = (
                f"the body calls {describe_call(run.fresh[0])}, which has no record, where "
                f"the history recorded {describe_call(first)}: a call replaced or inserted "
                "under the workflow (guard such a change with ctx.patched)"
            )
        else:
            detail = (
                f"the body never reaches the recorded {describe_call(first)}"
                + (f" and {len(unread) - 1} more record(s)" if len(unread) > 1 else "")
                + ": a call removed or moved under the workflow"
            )
        return found(Finding.STEP_DRIFT, detail)
    if ended is not None and "v" in ended:
        return _completed_alike(replay, ended["v"], found)
    return found(Finding.OK, "the body fits the history")


def _with(
    report: WorkflowReplay,
    finding: Finding,
    detail: str,
    ending: str,
    run: _ReplayExecution,
    unread: list[str],
    error: BaseException | None,
) -> WorkflowReplay:
    return WorkflowReplay(
        report.tenant,
        report.workflow,
        report.kind,
        finding,
        detail,
        ending,
        tuple(run.fresh),
        tuple(unread),
        run.replayed,
        error,
    )


def _completed_alike(
    replay: _Replay,
    recorded: object,
    found: Callable[[Finding, str], WorkflowReplay],
) -> WorkflowReplay:
    """The report for a history that completed with ``recorded``.

    The body must return the same (as the codec writes it) and call nothing more.
    """
    if not replay.returned:
        if replay.execution.fresh:
            return found(
                Finding.STEP_DRIFT,
                f"the history completed, but the body now goes on to "
                f"{describe_call(replay.execution.fresh[0])}",
            )
        return found(Finding.STEP_DRIFT, "the history completed, but the body now does not end")
    try:
        encoded = replay.workflow.signature.result.encode(replay.value)
    except Exception as exc:
        return found(Finding.BODY_FAILED, f"the body returns a value it cannot encode: {exc}")
    codec = JsonCodec()
    if codec.encode(encoded) != codec.encode(recorded):
        return found(
            Finding.RESULT_DRIFT,
            f"the body returns {_short(codec.encode(encoded))} where the history completed "
            f"with {_short(codec.encode(recorded))}",
        )
    return found(Finding.OK, "the body fits the history")


def _stop_finding(error: WorkflowStopped, records: Mapping[str, object]) -> Finding:
    if isinstance(error, IncompatibleRecordError):
        return Finding.INCOMPATIBLE_RECORD
    if isinstance(error, NondeterminismError) and getattr(error, "recorded", None) is None:
        # Another digest at a step's own record: the same step, other arguments.
        record = records.get(error.key)
        if isinstance(record, dict) and "a" in record:
            return Finding.ARGUMENT_DRIFT
    return Finding.STEP_DRIFT


def _failure(replay: _Replay, leaves: list[BaseException]) -> BaseException | None:
    """The body's own failure: the exception it raised, unless a stop or a wait."""
    raised = replay.raised
    if raised is None or isinstance(raised, IncompatibleRecordError):
        return None
    if isinstance(raised, Exception) and not isinstance(raised, WorkflowStopped):
        return raised
    failures = [leaf for leaf in leaves if isinstance(leaf, Exception)]
    if failures:
        return failures[0]
    ctx = replay.ctx
    stray = ctx is not None and not ctx._cancel_delivered and replay.stuck is None
    if stray and any(isinstance(leaf, asyncio.CancelledError) for leaf in leaves):
        return StrayCancellationError("the body")  # as a worker's pass reports it
    return None


def _failure_text(failure: BaseException) -> str:
    """What the App records for a body that raised ``failure``."""
    return mend_text(repr(failure), "error")


def _ending(replay: _Replay, leaves: list[BaseException]) -> str:
    """How the replay ended, for people."""
    ctx = replay.ctx
    if replay.returned:
        return "completed"
    if ctx is not None and ctx._stopped is not None:
        return f"parked: {ctx._stopped}"
    if replay.execution.fresh:
        calls = ", ".join(describe_call(key) for key in replay.execution.fresh)
        return f"would run {calls} next"
    for leaf in leaves:
        if isinstance(leaf, WorkflowStopped):
            return f"{leaf.status}: {leaf}"
        if isinstance(leaf, asyncio.CancelledError) and ctx is not None and ctx._cancel_delivered:
            return "cancelled"
    for leaf in leaves:
        if isinstance(leaf, Exception):
            return f"failed: {leaf!r}"
    waits = [_wait(leaf) for leaf in leaves if isinstance(leaf, Suspended)]
    return "waits " + ", ".join(waits) if waits else "stopped"


def _wait(suspension: Suspended) -> str:
    if isinstance(suspension, ScheduledWakeup):
        return f"asleep until {datetime.fromtimestamp(suspension.due, UTC).isoformat()}"
    if isinstance(suspension, MessageNeeded):
        return f"for a message ({suspension.key})"
    if isinstance(suspension, InputNeeded) and suspension.key.startswith(layout.CHILD):
        return f"for its child ({suspension.key.removesuffix(':end')})"
    return f"for {suspension.key}"


def _leaves(exc: BaseException) -> list[BaseException]:
    """``exc``, or every exception inside it when it is a group (nested ones too)."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]


def _unread(unmet: set[str], run: _ReplayExecution) -> list[str]:
    """Recorded keys the body never reached, in recorded order.

    Every unmet key but the retry deadlines of a step it called (a recorded step replays
    without them; one with no record stops before its next attempt).
    """
    kept = [
        key
        for key in unmet
        if layout.RETRY not in key or key.split(layout.RETRY, 1)[0] not in run.touched
    ]
    return sorted(kept, key=lambda key: run.positions.get(key, len(run.positions)))


def _reordered(order: list[str], positions: Mapping[str, int]) -> str | None:
    """Why the body's own task reads recorded keys in another order than recorded, or None.

    Calls in branches (tasks the body starts) may land in any order and are left out.
    """
    latest: str | None = None
    for key in order:
        if latest is not None and positions[key] < positions[latest]:
            return (
                f"the body reads the recorded {describe_call(key)} after "
                f"{describe_call(latest)}, which the history recorded later: calls "
                "reordered under the workflow (guard such a change with ctx.patched)"
            )
        if latest is None or positions[key] > positions[latest]:
            latest = key
    return None


def describe_call(key: str) -> str:
    """How a report names the call recorded (or to be recorded) under ``key``."""
    if key.startswith(layout.CHILD):
        return f"child workflow {key.removeprefix(layout.CHILD).rsplit('#', 1)[0]!r} ({key!r})"
    if key.startswith(layout.STARTED):
        return f"start of workflow {key.removeprefix(layout.STARTED).rsplit('#', 1)[0]!r}"
    if key.startswith(layout.PREFIX):
        return repr(key)
    return f"step {key!r}"


def _short(text: str, width: int = 120) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


__all__ = [
    "KEPT",
    "MAX_KEPT",
    "MAX_ROUNDS",
    "OUTSIDE_WAIT",
    "QUIET_TURNS",
    "Finding",
    "NextCall",
    "WorkflowReplay",
    "describe_call",
    "replay_workflow",
]
