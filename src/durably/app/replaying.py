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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from durably.app import _layout as layout
from durably.app import _tenancy as tenancy
from durably.app._replay_pass import MAX_KEPT, ReplayExecution, ReplayPass, Runaway
from durably.clock import Clock
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

if TYPE_CHECKING:
    from durably.app._app import App


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
    replay = ReplayPass(workflow, key, copy, start, clock if clock is not None else app.clock)
    await replay.run()
    return _judged(replay, WorkflowReplay(tenant, id, kind, Finding.OK, "", ""))


# --- judging ----------------------------------------------------------------------------------


def _judged(replay: ReplayPass, report: WorkflowReplay) -> WorkflowReplay:
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
    runaway = next((leaf for leaf in leaves if isinstance(leaf, Runaway)), None)
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
    run: ReplayExecution,
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
    replay: ReplayPass,
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


def _failure(replay: ReplayPass, leaves: list[BaseException]) -> BaseException | None:
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


def _ending(replay: ReplayPass, leaves: list[BaseException]) -> str:
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


def _unread(unmet: set[str], run: ReplayExecution) -> list[str]:
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


__all__ = ["Finding", "WorkflowReplay", "describe_call", "replay_workflow"]
