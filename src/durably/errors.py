"""The error hierarchy shared by every layer and backing.

Every error carries ``retryable`` and the context needed to act on it (store, tenant, ids).
The workflow control signals (`Interruption` and its subclasses) are deliberately *not*
`Exception`s, so an ``except Exception`` around a step cannot absorb them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

PersistenceReason = Literal["unavailable", "contended", "too_large"]
LeaseLostReason = Literal["taken", "expired", "capped"]
ClaimUnavailableReason = Literal["missing", "expired"]


class DurablyError(Exception):
    """Root of every error durably raises. ``retryable`` says whether trying again may help."""

    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class DurablyWarning(UserWarning):
    """Root of every warning durably gives (filter them by this category)."""


class ValueTypeWarning(DurablyWarning):
    """An annotation whose values may not come back as they were given, at registration.

    ``Any``, ``object`` or a container without item types (``dict``, ``list[Any]``): the
    value comes back as plain JSON (strings, lists, dicts). A pydantic model with a
    ``bytes`` field kept as UTF-8 text (its default), or with a ``set`` field, which the
    model writes in an order that differs between processes.
    """


class ConfigurationError(DurablyError):
    """The store, schema or settings are wrong; fix the deployment, do not retry."""


class DsnError(ConfigurationError, ValueError):
    """A DSN is malformed or names no backing; refused before any I/O. Its message never
    contains the DSN."""


class StoreUnavailableError(DurablyError):
    """The store a DSN names could not be reached (down, unreachable, timed out). Retryable;
    its message never contains the DSN or a password."""

    retryable = True


class InvalidInputError(DurablyError, ValueError):
    """An argument was refused before any I/O (empty id, NUL character, bad duration)."""


class StateConflictError(DurablyError):
    """A compare-and-set write found a different version than the one it was based on."""

    def __init__(self, key: object, expected_version: int, actual_version: int) -> None:
        self.key = key
        self.expected_version = expected_version
        self.actual_version = actual_version
        super().__init__(
            f"version conflict on {key}: expected version {expected_version}, "
            f"stored version is {actual_version}; re-read and try again"
        )


class StateNotFoundError(DurablyError):
    """The run or session does not exist (for this tenant)."""

    def __init__(self, key: object, kind: str) -> None:
        self.key = key
        self.kind = kind
        super().__init__(f"{kind} {key} not found")


class StateInUseError(DurablyError):
    """A session still has runs that are not terminal; finish them or delete with cascade."""

    def __init__(self, key: object, live_runs: tuple[str, ...]) -> None:
        self.key = key
        self.live_runs = live_runs
        super().__init__(
            f"session {key} has {len(live_runs)} live run(s) {list(live_runs)[:5]}; "
            "pass cascade=True to delete them too"
        )


class StatePersistenceError(DurablyError):
    """The store could not persist or read state. Retryable unless the value is too large."""

    def __init__(self, store: str, reason: PersistenceReason, detail: str = "") -> None:
        self.store = store
        self.reason = reason
        self.detail = detail
        suffix = f": {detail}" if detail else ""
        super().__init__(f"{store} state store {reason}{suffix}", retryable=reason != "too_large")


class WorkItemNotFoundError(DurablyError):
    """No such work item for this tenant."""

    def __init__(self, item_id: str, tenant: str) -> None:
        self.item_id = item_id
        self.tenant = tenant
        super().__init__(f"work item {item_id!r} of tenant {tenant!r} not found")


class LeaseLostError(DurablyError):
    """The caller no longer holds the item's lease: another worker took it, it lapsed,
    or it was held past ``max_lease_seconds``. Never retryable: stop working on the item."""

    retryable = False

    def __init__(
        self, item_id: str, worker: str, holder: str | None, reason: LeaseLostReason
    ) -> None:
        self.item_id = item_id
        self.worker = worker
        self.holder = holder
        self.reason = reason
        super().__init__(
            f"worker {worker!r} lost the lease on {item_id!r} ({reason}; holder now {holder!r})"
        )


class QueueUnavailableError(DurablyError):
    """The queue's datastore did not answer within the retry budget."""

    retryable = True

    def __init__(self, queue: str, operation: str, detail: str = "") -> None:
        self.queue = queue
        self.operation = operation
        suffix = f": {detail}" if detail else ""
        super().__init__(f"queue {queue!r} unavailable during {operation}{suffix}")


class PoolExhaustedError(DurablyError):
    """Every pooled connection is busy. Raised at once, never retried internally:
    the datastore is fine and this process is over-subscribed."""

    retryable = True

    def __init__(self, store: str, pool_size: int | None = None, detail: str = "") -> None:
        self.store = store
        self.pool_size = pool_size
        size = "" if pool_size is None else f" (size {pool_size})"
        super().__init__(
            f"{store} connection pool exhausted{size}" + (f": {detail}" if detail else "")
        )


class ReplicationTimeoutError(DurablyError):
    """A write the primary applied was acknowledged by fewer replicas than the settings ask
    for (``wanted``) within ``timeout_seconds``: it is not yet safe from a failover to a
    replica. Retryable: a retry rewrites nothing already written (or writes it again) and
    waits once more."""

    retryable = True

    def __init__(self, store: str, wanted: int, acknowledged: int, timeout_seconds: float):
        self.store = store
        self.wanted = wanted
        self.acknowledged = acknowledged
        self.timeout_seconds = timeout_seconds
        super().__init__(
            f"{store} write acknowledged by {acknowledged} of the {wanted} replica(s) wanted "
            f"within {timeout_seconds}s; it is on the primary only and a failover may lose it"
        )


class ClaimUnavailableError(DurablyError):
    """A claim-check handle whose blob is gone: never stored here, forgotten, or past its
    time to live (``reason`` "missing" or "expired"). Not retryable: the value is lost."""

    retryable = False

    def __init__(self, handle: str, reason: ClaimUnavailableReason) -> None:
        self.handle = handle
        self.reason = reason
        super().__init__(f"claim check {handle} is unavailable ({reason})")


class Swallowed(DurablyError):
    """A workflow body caught a suspension and returned anyway: a bug in the workflow."""

    def __init__(self, workflow: str, suspensions: tuple[Suspended, ...]) -> None:
        self.workflow = workflow
        self.suspensions = suspensions
        keys = [s.key for s in suspensions]
        super().__init__(
            f"workflow {workflow!r} swallowed suspension(s) at {keys}: "
            "do not catch durably's Interruption signals"
        )


class StrayCancellationError(DurablyError):
    """A handler, workflow body or step ended with `asyncio.CancelledError` that nobody
    asked for: not the worker's shutdown, not a lost lease or claim, not
    ``handle.cancel()`` (it raised the error itself, or awaited something another task
    cancelled). Kept as a failure of that attempt and retried as any other, rather than
    leaving the work held until its lease lapses."""

    retryable = True

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} ended with asyncio.CancelledError, though neither the worker nor a "
            "cancel() cancelled it"
        )


# --- the application layer (`durably.App`) ------------------------------------------------


class NonRetryable(DurablyError):
    """Raise it from a step to fail the step at once, whatever its retry policy allows."""


class WorkflowStopped(DurablyError):
    """Raised out of a workflow body to end the workflow with ``status`` (``"parked"`` or
    ``"cancelled"``) instead of failing it. The worker reports that status, uses no
    attempt and schedules no further pass."""

    status: str = "parked"


class NondeterminismError(WorkflowStopped):
    """A replay no longer matches what an earlier pass recorded (the body changed under an
    in-flight workflow): a step called with other arguments than the recorded call at its
    key, or a step called where an earlier pass recorded another (``recorded`` names that
    one). Parks the workflow: fix the code, then ``handle.resume()``."""

    def __init__(
        self, workflow: str, key: str, detail: str, *, recorded: str | None = None
    ) -> None:
        self.workflow = workflow
        self.key = key
        self.recorded = recorded
        super().__init__(f"workflow {workflow!r}, step {key!r}: {detail}")


class IncompatibleRecordError(WorkflowStopped):
    """A recorded value no longer validates as its annotated type (a model changed under an
    in-flight workflow). Parks the workflow: fix the model, then ``handle.resume()``."""

    def __init__(self, workflow: str, key: str, type_name: str, stored: str, detail: str) -> None:
        self.workflow = workflow
        self.key = key
        self.type_name = type_name
        self.stored = stored
        super().__init__(
            f"workflow {workflow!r}: the record at {key!r} is no longer a valid "
            f"{type_name} ({detail}); stored JSON: {stored[:500]}"
        )


class RecordLimitError(WorkflowStopped):
    """A workflow reached the most records one run may hold (``Limits.records``): its
    history would grow without end. Parks the workflow: have the body call
    ``ctx.continue_as_new(...)`` before the limit (or raise the limit), then
    ``handle.resume()``."""

    def __init__(self, workflow: str, limit: int) -> None:
        self.workflow = workflow
        self.limit = limit
        super().__init__(
            f"workflow {workflow!r} reached {limit} records, the most one run may hold "
            "(Limits.records): call ctx.continue_as_new(...) to go on with a fresh "
            "history, or raise the limit and resume it"
        )


class UnreadableRecordError(IncompatibleRecordError):
    """A stored record cannot be read at all: it is not text its codec reads (corrupt, or
    written by something else), or it holds what no value may (NaN, an int too long, JSON
    nested too deeply). Parks a workflow that meets it in a pass, as an
    `IncompatibleRecordError` does: repair or remove the record, then ``handle.resume()``.

    ``key`` is the first record that could not be read (``"status"`` for the workflow's
    status row); ``unreadable`` maps every such key to why; ``readable`` holds the other
    records of the same read, as the read would have returned them, so that a reader can
    go on around the damage (`durably workflows show` lists them)."""

    def __init__(
        self,
        workflow: str,
        unreadable: Mapping[str, str],
        stored: str = "",
        readable: Mapping[str, object] | None = None,
    ) -> None:
        key, detail = next(iter(unreadable.items()))
        self.workflow = workflow
        self.key = key
        self.type_name = "record"
        self.stored = stored
        self.unreadable = dict(unreadable)
        self.readable: dict[str, object] = dict(readable or {})
        more = f" (and {len(unreadable) - 1} more)" if len(unreadable) > 1 else ""
        shown = f"; stored: {stored[:200]}" if stored else ""
        WorkflowStopped.__init__(
            self,
            f"workflow {workflow!r}: the record at {key!r} cannot be read{more}: {detail}{shown}",
        )


class StepFailedError(DurablyError):
    """A step failed for good (retries exhausted or not retryable); its error is recorded,
    so every replay raises this same error at the same call."""

    def __init__(self, workflow: str, key: str, error_type: str, message: str) -> None:
        self.workflow = workflow
        self.key = key
        self.error_type = error_type
        self.error_message = message
        super().__init__(f"step {key!r} of workflow {workflow!r} failed: {error_type}: {message}")


class StepResultError(NonRetryable):
    """A step returned a value its annotation cannot encode; the step's effect already ran."""


class StepTimeoutError(DurablyError):
    """One attempt of a step outlived its ``timeout``."""

    retryable = True


class WorkflowFailedError(DurablyError):
    """The workflow ended FAILED, with the failure it recorded.

    ``workflow`` is its id; ``error`` the failure as text (the exception's repr);
    ``type`` the exception's type name and ``message`` its message; ``step`` the key of
    the step whose failure ended it (``charge#1``), None when the body raised on its own.
    For a step's failure, ``type`` and ``message`` are the step's own error's. A failure
    recorded before types were kept has only ``error``: ``type`` and ``message`` are None.
    """

    def __init__(
        self,
        workflow: str,
        error: str | None,
        *,
        type: str | None = None,
        message: str | None = None,
        step: str | None = None,
    ) -> None:
        self.workflow = workflow
        self.error = error
        self.type = type
        self.message = message
        self.step = step
        super().__init__(f"workflow {workflow!r} failed: {error}")


class ChildWorkflowFailedError(WorkflowFailedError):
    """A child workflow awaited with ``ctx.child`` failed (``workflow`` names the child)."""


class WorkflowCancelledError(DurablyError):
    """The workflow was cancelled: by `WorkflowHandle.cancel`, or (``timed_out``) by its
    own ``timeout=`` deadline."""

    def __init__(self, workflow: str, *, timed_out: bool = False) -> None:
        self.workflow = workflow
        self.timed_out = timed_out
        what = "timed out (its timeout= deadline passed)" if timed_out else "was cancelled"
        super().__init__(f"workflow {workflow!r} {what}")


class WorkflowConflictError(DurablyError):
    """A workflow of this id exists under another kind, or (``reason`` says which) is not
    one a start may return: a child id taken by a workflow that is not this parent's
    child."""

    def __init__(
        self, workflow: str, kind: str, existing: str, *, reason: str | None = None
    ) -> None:
        self.workflow = workflow
        self.kind = kind
        self.existing = existing
        super().__init__(
            f"workflow {workflow!r} {reason}"
            if reason is not None
            else f"workflow {workflow!r} exists as kind {existing!r}; cannot start it as {kind!r}"
        )


class WorkflowFinishedError(InvalidInputError):
    """The workflow has finished (completed, failed or cancelled): it takes no messages."""


class WorkflowLimitError(DurablyError):
    """A start would pass one of the App's `Limits`: more workflows from one body
    (``limit="children"``), a chain of bodies starting bodies deeper (``limit="depth"``),
    or more workflows of one tenant unfinished (``"running_per_tenant"``) or held in the
    store (``"started_per_tenant"``) than allowed. Not retryable: the same start is refused
    again; change the body, or the App's limits."""

    def __init__(self, tenant: str, workflow: str, limit: str, maximum: int, count: int) -> None:
        self.tenant = tenant
        self.workflow = workflow
        self.limit = limit
        self.maximum = maximum
        self.count = count
        if limit.endswith("_per_tenant"):
            held = "unfinished" if limit.startswith("running") else "held in the store"
            message = (
                f"tenant {tenant!r}: workflow {workflow!r} may not start: the tenant would "
                f"have {count} workflows {held}, over the limit of {maximum} "
                f"(durably.Limits.{limit})"
            )
        else:
            message = (
                f"tenant {tenant!r}: workflow {workflow!r} may not start another workflow: "
                f"it would make {limit} {count}, over the limit of {maximum} (durably.Limits)"
            )
        super().__init__(message, retryable=False)


class WorkflowNotFoundError(DurablyError):
    """No workflow has this id (in this tenant, when ``tenant`` is given): never started,
    or removed by the retention sweep."""

    def __init__(self, workflow: str, *, tenant: str | None = None) -> None:
        self.workflow = workflow
        self.tenant = tenant
        where = "" if tenant is None else f" in tenant {tenant!r}"
        super().__init__(f"workflow {workflow!r} not found{where} (never started, or swept)")


# --- workflow control signals -------------------------------------------------------------


class Interruption(BaseException):
    """A workflow pass must stop here. Not an `Exception` on purpose."""


class Contended(Interruption):
    """Another live pass holds the workflow."""

    def __init__(self, workflow: str) -> None:
        self.workflow = workflow
        super().__init__(f"workflow {workflow!r} is held by another pass")


class Fenced(Interruption):
    """This pass was superseded: its claim token is no longer the workflow's newest."""

    def __init__(self, workflow: str, token: int) -> None:
        self.workflow = workflow
        self.token = token
        super().__init__(f"pass {token} of workflow {workflow!r} was superseded")


class PassEnded(Interruption):
    """The pass this call belongs to has reported how it ended: a branch of the body that
    outlived it (one a bare ``asyncio.gather`` left running) may not start a step now. The
    step has not run; the next pass runs it."""

    def __init__(self, workflow: str, key: str) -> None:
        self.workflow = workflow
        self.key = key
        super().__init__(
            f"workflow {workflow!r}: step {key!r} was called after its pass ended; "
            "it did not run (the next pass runs it)"
        )


class Suspended(Interruption):
    """The pass cannot continue until something happens outside it."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(key)


class InputNeeded(Suspended):
    """``run.awaiting(key)`` has no value yet; ``Durable.arrive`` supplies it."""


class MessageNeeded(Suspended):
    """``run.receive(key)`` found no new message; ``Durable.deliver`` sends one."""


class ContinueAsNew(Interruption):
    """Raised by ``ctx.continue_as_new(...)``: this run of the workflow ends here and the
    workflow begins afresh with ``arguments`` (encoded). Not an `Exception`, so an
    ``except Exception`` in the body lets it through."""

    def __init__(self, arguments: dict[str, object]) -> None:
        self.arguments = arguments
        super().__init__("continue as new")


class ScheduledWakeup(Suspended):
    """``run.sleep(key, ...)`` has not reached its deadline ``due`` (the caller's clock)."""

    def __init__(self, key: str, due: float) -> None:
        self.due = due
        super().__init__(key)


__all__ = [
    "ChildWorkflowFailedError",
    "ClaimUnavailableError",
    "ClaimUnavailableReason",
    "ConfigurationError",
    "Contended",
    "ContinueAsNew",
    "DsnError",
    "DurablyError",
    "DurablyWarning",
    "Fenced",
    "IncompatibleRecordError",
    "InputNeeded",
    "Interruption",
    "InvalidInputError",
    "LeaseLostError",
    "LeaseLostReason",
    "MessageNeeded",
    "NonRetryable",
    "NondeterminismError",
    "PassEnded",
    "PersistenceReason",
    "PoolExhaustedError",
    "QueueUnavailableError",
    "RecordLimitError",
    "ReplicationTimeoutError",
    "ScheduledWakeup",
    "StateConflictError",
    "StateInUseError",
    "StateNotFoundError",
    "StatePersistenceError",
    "StepFailedError",
    "StepResultError",
    "StepTimeoutError",
    "StoreUnavailableError",
    "StrayCancellationError",
    "Suspended",
    "Swallowed",
    "UnreadableRecordError",
    "ValueTypeWarning",
    "WorkItemNotFoundError",
    "WorkflowCancelledError",
    "WorkflowConflictError",
    "WorkflowFailedError",
    "WorkflowFinishedError",
    "WorkflowNotFoundError",
    "WorkflowStopped",
]
