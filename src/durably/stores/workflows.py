"""Workflows: what a workflow has done (`Checkpointer`), when it may run next (`Scheduler`),
and the transitions that cross both (`Durable`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from durably.errors import (
    DurablyError,
    InvalidInputError,
    StatePersistenceError,
    UnreadableRecordError,
    WorkflowFinishedError,
)
from durably.stores.codec import CheckpointCodec, decoded_records, key_text
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.work import WorkPriority
from durably.validation import identifier

EffectT = TypeVar("EffectT")
EffectT_contra = TypeVar("EffectT_contra", contravariant=True)
T = TypeVar("T")

INBOX_PREFIX = "inbox:"
INBOX_DIGITS = 20

MAX_NAMED_KEYS = 1000
"""The most keys one `Checkpointer.peek` or `Checkpointer.forget` names."""

DEFAULT_LEASE = 30.0
"""Seconds a scheduler's delivery stays invisible unless ``lease=`` says otherwise."""
DEFAULT_NAMESPACE = "default"
"""The scheduler namespace (the workflow kind a scheduler serves) unless one is named."""
DEFAULT_TENANT = "default"
"""The tenant a ready workflow is served for when none was ever named for it; entries
written before schedulers kept tenants are this tenant's."""

# Fairness, the one order every `Scheduler` hands out ready workflows in: the work queue's
# order (durably.stores.work), with a workflow's visibility as an item's availability and
# its priority (a `WorkPriority` value, the queue's) as an item's priority:
#   1. among tenants with a visible ready workflow, the one whose turn is lowest (a tenant
#      never served has turn 0; ties go to the tenant whose ready workflow has waited
#      longest, then by tenant);
#   2. handing one out sets the tenant's turn above every other turn of the namespace;
#   3. within the tenant, the highest priority, then the workflow visible longest, then
#      the lowest workflow id.
# A hand-out whose lease lapsed is visible again from the lapse: the next hand-out returns
# it to its tenant's ready workflows (forgetting the lapsed receipt) and serves in this order.

DEFAULT_PRIORITY = int(WorkPriority.NORMAL)
"""The priority a new entry is served at when none is named: a task's default too."""

LAPSED_PER_TAKE = 200
"""The most lapsed hand-outs one `Scheduler.next_ready` returns to their tenants' lines
(earliest first), so no take runs long when thousands lapse at once; the rest follow over
the next takes."""


def new_priority(priority: object) -> int:
    """``priority`` as `ready_priority` checks it, None refused too: the priority a
    workflow is moved to. `InvalidInputError` naming it otherwise, before any I/O."""
    rank = ready_priority(priority)
    if rank is None:
        raise InvalidInputError("priority must be a durably.WorkPriority, got None")
    return rank


def ready_priority(priority: object) -> int | None:
    """``priority`` as the int a scheduler stores: None (keep the entry's), or one of the
    `WorkPriority` values a task's item may have. `InvalidInputError` naming it otherwise,
    before any I/O."""
    if priority is None:
        return None
    if type(priority) is WorkPriority or (type(priority) is int and priority in _PRIORITIES):
        return int(priority)
    raise InvalidInputError(f"priority must be a durably.WorkPriority, got {priority!r}")


_PRIORITIES = frozenset(int(priority) for priority in WorkPriority)


def inbox_key(position: int) -> str:
    """The key `append` stores message number ``position`` under; sorts in append order."""
    return f"{INBOX_PREFIX}{position:0{INBOX_DIGITS}d}"


def is_inbox_key(key: str) -> bool:
    """Whether ``key`` lies in the key space `append` names (refused as a step name)."""
    return key.startswith(INBOX_PREFIX)


def step_key(key: object, name: str = "key") -> str:
    """``key`` if a value may be written under it by `record`, `supply` or `transact`: an
    identifier outside the inbox key space, which `append` alone names (a value written
    there would pass for a message). `InvalidInputError` otherwise, before any I/O."""
    checked = identifier(key, name)
    if is_inbox_key(checked):
        raise InvalidInputError(
            f"{name} {checked!r} lies in the inbox key space ({INBOX_PREFIX!r}...), "
            "which only append may write"
        )
    return checked


def named_keys(keys: object, name: str = "keys") -> list[str]:
    """``keys`` as a list without repeats, if it names at most `MAX_NAMED_KEYS` records:
    a collection (not a single string) of identifiers. `InvalidInputError` otherwise,
    before any I/O."""
    if isinstance(keys, str | bytes) or not isinstance(keys, Collection):
        raise InvalidInputError(f"{name} must be a collection of keys, got {type(keys).__name__}")
    if len(keys) > MAX_NAMED_KEYS:
        raise InvalidInputError(f"{name}: at most {MAX_NAMED_KEYS} keys per call, got {len(keys)}")
    return list(dict.fromkeys(identifier(key, "key") for key in keys))


def message_keys(keys: object) -> list[str]:
    """`named_keys` of messages (keys `append` named): what `Checkpointer.forget` may
    delete; `InvalidInputError` for any other key, before any I/O."""
    checked = named_keys(keys)
    for key in checked:
        if not is_inbox_key(key):
            raise InvalidInputError(
                f"key {key!r} is not a message's ({INBOX_PREFIX!r}...): only messages are "
                "forgotten; a recorded step is never removed"
            )
    return checked


def kept_prefixes(keep: object) -> tuple[str, ...]:
    """The key prefixes a `Checkpointer.restart` keeps: a collection (not a single string)
    of at most 16 non-empty identifiers; `InvalidInputError` otherwise, before any I/O."""
    if isinstance(keep, str | bytes) or not isinstance(keep, Collection):
        raise InvalidInputError(f"keep must be a collection of prefixes, got {type(keep).__name__}")
    if len(keep) > 16:
        raise InvalidInputError(f"keep: at most 16 prefixes, got {len(keep)}")
    return tuple(dict.fromkeys(identifier(prefix, "keep prefix") for prefix in keep))


_FINISHED_TEXTS = frozenset(status.value for status in WorkflowStatus if status.finished)


def refuse_finished(workflow: str, status: str | bytes | None) -> None:
    """Raise `WorkflowFinishedError` when ``status`` (a `WorkflowStatus` value as stored,
    or None for none reported) is finished: what an append ``unless_finished`` refuses.
    A status something else wrote (no such status) is not known to be finished, as the
    stores that check in their own statement see it: the next pass parks the workflow."""
    text = status.decode(errors="replace") if isinstance(status, bytes) else status
    if text in _FINISHED_TEXTS:
        raise WorkflowFinishedError(f"workflow {workflow!r} is {text}: it takes no messages")


@dataclass(frozen=True, slots=True)
class Pass:
    """One claim on a workflow; ``token`` is its fencing token (strictly increasing)."""

    workflow: str
    token: int


@dataclass(frozen=True, slots=True)
class Recorded(Generic[T]):
    """The value stored under a key and whether this write was the first (``first``)."""

    value: T
    first: bool


@dataclass(frozen=True, slots=True)
class Delivery:
    """A scheduler's hand-out of a workflow; ``receipt`` answers exactly this hand-out."""

    workflow: str
    receipt: str


@dataclass(frozen=True, slots=True)
class Entry:
    """A message appended to a workflow's inbox under the key the store named."""

    key: str
    value: object


@dataclass(frozen=True, slots=True)
class Written:
    """A record with the (timezone-aware) time it landed."""

    value: object
    at: datetime


def written_records(
    codec: CheckpointCodec,
    workflow: str,
    rows: Sequence[tuple[str | bytes, str | bytes, datetime]],
) -> dict[str, Written]:
    """``workflow``'s ``(key, stored text, time)`` rows as a history: each value decoded
    (`durably.stores.codec.decoded_records`, whose `UnreadableRecordError` this raises,
    its ``readable`` records given with their times)."""
    try:
        values = decoded_records(codec, workflow, [(key, text) for key, text, _ in rows])
    except UnreadableRecordError as exc:
        times = {key_text(key): at for key, _, at in rows}
        exc.readable = {key: Written(value, times[key]) for key, value in exc.readable.items()}
        raise
    return {
        key: Written(value, at)
        for (key, value), (_, _, at) in zip(values.items(), rows, strict=True)
    }


@dataclass(frozen=True, slots=True)
class Completed(Generic[T]):
    """The body returned ``value``."""

    value: T


@dataclass(frozen=True, slots=True)
class Finish(Generic[T]):
    """What a body returns to have its last record written together with its COMPLETED
    status, in one write (`finish_workflow`): ``value`` under ``key`` (first writer wins),
    and ``result`` as the pass's `Completed` value.

    The `Worker` writes both; `resume` and `advance` hand the `Finish` back as it is, for
    their caller to write.
    """

    key: str
    value: object
    result: T


@dataclass(frozen=True, slots=True)
class Sleeping:
    """The body sleeps at step ``key`` until ``due`` (the caller's clock)."""

    key: str
    due: float


@dataclass(frozen=True, slots=True)
class Blocked:
    """The body waits for values (``waiting``) or messages (``listening``) from outside.

    ``due`` is the earliest deadline the body also sleeps until (a timeout beside the
    wait, say in a task group), or None: the workflow runs again then if nothing
    arrives first.
    """

    waiting: frozenset[str]
    listening: frozenset[str]
    due: float | None = None

    def __post_init__(self) -> None:
        if not self.waiting and not self.listening:
            raise ValueError("Blocked needs at least one waiting or listening key")


@dataclass(frozen=True, slots=True)
class Restart:
    """What a body returns to begin its workflow afresh (continue-as-new): the Worker
    writes it with `Checkpointer.restart` (every record but those under the ``keep``
    prefixes deleted, ``value`` written under ``key``, status PENDING, one write) and
    makes the workflow ready, so a new pass starts from the top on the new record.

    `resume` and `advance` hand it back (as the `Completed` value) for their caller to
    write, as they do a `Finish`.
    """

    key: str
    value: object
    keep: tuple[str, ...] = (INBOX_PREFIX,)


Outcome = Completed[T] | Sleeping | Blocked


@runtime_checkable
class Checkpointer(Protocol[EffectT_contra]):
    """One record per named step of a workflow, and who may add to it (a fenced claim).

    Claims lapse at the earlier of their budget and their liveness window, both measured by
    the store's own clock.
    """

    @property
    def codec(self) -> CheckpointCodec:
        """The codec values are stored with."""
        ...

    async def close(self) -> None:
        """Release what the store holds of its own, such as a listening connection; a
        pool, client or database passed in stays open for its owner. Idempotent."""
        ...

    async def load(self, workflow: str) -> dict[str, object]:
        """Every record, decoded, in first-recorded order; ``{}`` for an unknown workflow."""
        ...

    async def peek(self, workflow: str, keys: Collection[str]) -> dict[str, object]:
        """The records under ``keys`` that exist, decoded, in the order asked: one read
        whose cost does not grow with the workflow's other records. At most
        `MAX_NAMED_KEYS` keys (`InvalidInputError`, before any I/O)."""
        ...

    async def claim(self, workflow: str, budget: float, alive: float) -> Pass | None:
        """Take the workflow if no live pass holds it; None if one does."""
        ...

    async def renew(self, holder: Pass, alive: float) -> bool:
        """Push the liveness window out (never past the budget); False if superseded or spent."""
        ...

    async def extend(self, holder: Pass, budget: float, alive: float) -> bool:
        """Grow the budget (never shrink it) and renew; False if superseded."""
        ...

    async def record(self, holder: Pass, key: str, value: object) -> Recorded[object]:
        """Write ``key`` once (first writer wins); `Fenced` if ``holder`` was superseded."""
        ...

    async def transact(self, holder: Pass, key: str, effect: EffectT_contra) -> Recorded[object]:
        """Run ``effect`` and record its value in one commit, exactly once across passes."""
        ...

    async def supply(self, workflow: str, key: str, value: object) -> Recorded[object]:
        """First-writer-wins write from outside any pass."""
        ...

    async def append(self, workflow: str, value: object, *, unless_finished: bool = False) -> Entry:
        """Add a message under a store-named ``inbox:`` key that sorts in append order.

        With ``unless_finished``, the status is read in the same atomic write and a
        finished workflow (completed, failed, cancelled) refuses the message with
        `WorkflowFinishedError`, writing nothing: a message never lands after the end.
        """
        ...

    async def forget(self, holder: Pass, keys: Collection[str]) -> int:
        """Delete the messages under ``keys`` (consumed, their values kept by the records
        that consumed them) for ``holder``, in one write; the number deleted (a key not
        there is skipped). `Fenced` if ``holder`` was superseded, deleting nothing;
        `InvalidInputError` before any I/O for a key `append` did not name or more than
        `MAX_NAMED_KEYS` keys."""
        ...

    async def restart(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        keep: Collection[str] = (INBOX_PREFIX,),
    ) -> int:
        """Begin the workflow afresh for ``holder``, atomically: delete every record whose
        key starts with none of the ``keep`` prefixes, write ``value`` under ``key``
        (replacing a value there) and report the status PENDING (no attempts, no error);
        the number of records deleted (a value replaced under ``key`` not counted).
        `Fenced` if ``holder`` was superseded, changing nothing. The claim is kept (and
        renewed)."""
        ...

    async def history(self, workflow: str) -> dict[str, Written]:
        """Every record with the time it landed, in first-recorded order."""
        ...

    async def discard(self, workflow: str) -> int:
        """Delete every record and fence the current holder, atomically; the count deleted."""
        ...

    async def release(self, holder: Pass) -> None:
        """End ``holder``'s claim now without rewinding its token."""
        ...

    async def set_status(
        self,
        holder: Pass,
        status: WorkflowStatus,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """Report the workflow's status; `Fenced` if ``holder`` was superseded."""
        ...

    async def get_status(self, workflow: str) -> WorkflowInfo | None:
        """The last reported status, or None (never reported, or discarded)."""
        ...

    async def list_status(
        self, *, status: WorkflowStatus | None = None, limit: int = 50, after: str | None = None
    ) -> list[WorkflowInfo]:
        """Statuses ordered by workflow id, those after ``after``, filtered by ``status``."""
        ...

    async def workflows(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Ids of the workflows that have records or a status (a started workflow no
        worker ran yet included), in code point order: those after ``after``, at most
        ``limit`` (1 to 10,000). For operators (``durably workflows list``), not a hot
        path: Redis scans its keys to answer."""
        ...

    async def sweep(
        self,
        *,
        finished_before: datetime,
        limit: int = 1000,
        on_swept: Callable[[str], Awaitable[None]] | None = None,
    ) -> int:
        """Delete, for up to ``limit`` workflows completed or failed before
        ``finished_before`` (aware; the store's clock) whose claim is not live, every
        record, the status and the claim, atomically per workflow; the number swept.

        A later claim still outranks every token handed out before. ``on_swept`` is awaited
        with each swept id. `InvalidInputError` for a naive datetime or a limit below 1.
        """
        ...


@runtime_checkable
class Finishing(Protocol):
    """The optional `Checkpointer` capability `finish_workflow` uses: ``record`` and
    ``set_status(COMPLETED)`` in one write. Every shipped checkpointer has it."""

    async def finish(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """Write ``key`` once (first writer wins: a value already there is kept) and report
        COMPLETED with ``attempts`` and ``error`` as `set_status` would, atomically;
        `Fenced` if ``holder`` was superseded, writing neither."""
        ...


@runtime_checkable
class Looking(Protocol):
    """The optional `Checkpointer` capability `look_at` uses: the status and some records
    in one read. Every shipped checkpointer has it."""

    async def look(
        self, workflow: str, keys: Collection[str]
    ) -> tuple[WorkflowInfo | None, dict[str, object]]:
        """The last reported status (None: never reported, or discarded) and the records
        under ``keys`` that exist, decoded, in the order asked, read together: one
        snapshot, so a status reported with a record (`Finishing.finish`) is never seen
        without it. At most `MAX_NAMED_KEYS` keys (`InvalidInputError`, before any I/O)."""
        ...


async def look_at(
    checkpointer: Checkpointer[Any], workflow: str, keys: Collection[str]
) -> tuple[WorkflowInfo | None, dict[str, object]]:
    """The status of ``workflow`` and its records under ``keys``: in one read where
    ``checkpointer`` has `Looking.look`, otherwise the status and then the records (so a
    record written with or before the status read is among them)."""
    look = getattr(checkpointer, "look", None)  # isinstance(Looking) costs ~8 us
    if look is not None:
        found: tuple[WorkflowInfo | None, dict[str, object]] = await look(workflow, keys)
        return found
    info = await checkpointer.get_status(workflow)
    return info, await checkpointer.peek(workflow, keys)


def value_refused(error: BaseException) -> bool:
    """Whether a write failed for the value it wrote, so that writing it again would fail
    again: over the store's size limit, refused by its checks (`InvalidInputError`), or
    not encodable by its codec (a `ValueError` or `TypeError`). A store that is down, a
    lost claim or a misconfigured store are not the value's fault."""
    if isinstance(error, StatePersistenceError):
        return error.reason == "too_large"
    if isinstance(error, InvalidInputError):
        return True
    if isinstance(error, DurablyError):
        return False
    return isinstance(error, ValueError | TypeError)


async def finish_workflow(
    checkpointer: Checkpointer[Any],
    holder: Pass,
    key: str,
    value: object,
    *,
    attempts: int = 0,
    error: str | None = None,
) -> WorkflowInfo:
    """Record ``value`` under ``key`` and report the workflow COMPLETED: in one write where
    ``checkpointer`` has `Finishing.finish`, otherwise as `record` then `set_status` (a
    crash between them leaves the record and a pass that reported nothing)."""
    finish = getattr(checkpointer, "finish", None)  # isinstance(Finishing) costs ~8 us
    if finish is not None:
        info: WorkflowInfo = await finish(holder, key, value, attempts=attempts, error=error)
        return info
    await checkpointer.record(holder, key, value)
    return await checkpointer.set_status(
        holder, WorkflowStatus.COMPLETED, attempts=attempts, error=error
    )


@runtime_checkable
class Scheduler(Protocol):
    """When each workflow may run next: one entry per workflow.

    Hand-outs are invisible for ``lease`` seconds (the store's clock) and come back if not
    answered; sleeping entries are due on the caller's clock and woken by `wake_due`.
    Exclusion is the checkpointer's job, not the scheduler's.
    """

    @property
    def lease(self) -> float:
        """Seconds a delivery stays invisible to other takers."""
        ...

    @property
    def namespace(self) -> str:
        """The namespace this scheduler's entries live in: the workflow kind it serves."""
        ...

    async def prepare(self) -> None:
        """Get ready to serve (idempotent)."""
        ...

    async def close(self) -> None:
        """Release what the store holds of its own, such as a listening connection; a
        pool, client or database passed in stays open for its owner. Idempotent."""
        ...

    async def make_ready(
        self, workflow: str, *, tenant: str | None = None, priority: int | None = None
    ) -> None:
        """Make the workflow runnable now, served in ``tenant``'s turn at ``priority``
        (`ready_priority`); survives a pass in flight. ``tenant`` None keeps the tenant the
        entry has (`DEFAULT_TENANT` for a new one), ``priority`` None its priority
        (`DEFAULT_PRIORITY` for a new one); a wakeup that names neither (an engine caller)
        never moves a workflow."""
        ...

    async def wake_at(self, delivery: Delivery, when: float) -> None:
        """Answer ``delivery`` and schedule the workflow at ``when`` (caller's clock),
        never pushing out a wakeup that arrived meanwhile."""
        ...

    async def reprioritize(self, workflow: str, priority: int) -> bool:
        """Serve the workflow's entry at ``priority`` (`ready_priority`, not None) from
        now on, its visibility and tenant unchanged: a ready entry takes its new place in
        its tenant's line; a sleeping or in-flight one keeps it for when it is ready
        again. False when the workflow has no entry (nothing changes)."""
        ...

    async def wake_due(self, now: float) -> int:
        """Make every sleeping entry due at or before ``now`` ready; the count woken."""
        ...

    async def next_ready(self, within: float) -> Delivery | None:
        """Take one ready workflow in the fairness order (tenants in rotation), waiting up
        to ``within`` seconds for one."""
        ...

    async def reclaim(self, idle: float) -> list[str]:
        """Make deliveries taken more than ``idle`` seconds ago visible again (0 = all);
        the workflows whose delivery was reclaimed."""
        ...

    async def extend(self, delivery: Delivery, within: float) -> bool:
        """Keep ``delivery`` invisible for ``within`` more seconds; False if not held."""
        ...

    async def cancel(self, workflow: str) -> None:
        """Remove the workflow's queued, sleeping or in-flight entry."""
        ...

    async def done(self, delivery: Delivery) -> None:
        """Answer ``delivery``; a wakeup that arrived meanwhile stays."""
        ...


MAX_READY_BATCH = 1000
"""The most entries one `ReadyingMany.make_ready_many` or `ReadyingMany.cancel_many` names."""


@dataclass(frozen=True, slots=True)
class Ready:
    """A wakeup of `ReadyingMany.make_ready_many`: ``workflow`` made runnable now, for
    ``tenant`` at ``priority`` (each None: kept, as `Scheduler.make_ready` takes them)."""

    workflow: str
    tenant: str | None = None
    priority: int | None = None


@runtime_checkable
class ReadyingMany(Protocol):
    """The optional `Scheduler` capability of many wakeups in one write (a bulk start or
    cancel). Every shipped scheduler has it."""

    async def make_ready_many(self, entries: Sequence[Ready]) -> None:
        """`Scheduler.make_ready` each entry, in one write (one transaction on SQLite and
        PostgreSQL, one round trip on Redis); of one workflow named twice the last entry
        stands. At most `MAX_READY_BATCH` (`InvalidInputError`, before any I/O)."""
        ...

    async def cancel_many(self, workflows: Sequence[str]) -> None:
        """`Scheduler.cancel` each workflow, in one write. At most `MAX_READY_BATCH`
        (`InvalidInputError`, before any I/O)."""
        ...


def ready_batch(entries: object) -> list[Ready]:
    """The entries of a `ReadyingMany.make_ready_many` call, checked before any I/O."""
    listed = _batch(entries, "entries")
    for entry in listed:
        if not isinstance(entry, Ready):
            raise InvalidInputError(f"each entry must be a Ready, got {entry!r}")
        identifier(entry.workflow, "workflow")
        if entry.tenant is not None:
            identifier(entry.tenant, "tenant")
        ready_priority(entry.priority)
    return listed


def workflow_batch(workflows: object) -> list[str]:
    """The workflows of a `ReadyingMany.cancel_many` call, checked before any I/O."""
    return [identifier(workflow, "workflow") for workflow in _batch(workflows, "workflows")]


def _batch(items: object, name: str) -> list[Any]:
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise InvalidInputError(f"{name} must be a sequence, got {type(items).__name__}")
    if len(items) > MAX_READY_BATCH:
        raise InvalidInputError(f"{name}: at most {MAX_READY_BATCH} a call, got {len(items)}")
    return list(items)


@runtime_checkable
class Durable(Protocol[EffectT_contra]):
    """A checkpointer and a scheduler, and the transitions that must cross them."""

    @property
    def checkpointer(self) -> Checkpointer[EffectT_contra]:
        """Where records and claims live."""
        ...

    @property
    def scheduler(self) -> Scheduler:
        """Where wakeups live."""
        ...

    async def arrive(
        self,
        workflow: str,
        key: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
    ) -> Recorded[object]:
        """Supply ``key`` (first writer wins) and make the workflow ready (for ``tenant``
        at ``priority``, as `Scheduler.make_ready` takes them)."""
        ...

    async def deliver(
        self,
        workflow: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
        unless_finished: bool = False,
    ) -> Entry:
        """Append a message and make the workflow ready (for ``tenant`` at ``priority``, as
        `Scheduler.make_ready` takes them); with ``unless_finished``, a finished workflow
        refuses it (`WorkflowFinishedError`), as `Checkpointer.append` does, and is not
        woken."""
        ...

    async def delete(self, workflow: str) -> int:
        """Cancel the workflow's wakeups and discard its records; the count discarded."""
        ...

    async def close(self) -> None:
        """Close the checkpointer and the scheduler (idempotent)."""
        ...


def _tenant(tenant: str | None, priority: int | None = None) -> None:
    """Refuse an unusable ``tenant`` or ``priority`` before the first of two writes."""
    if tenant is not None:
        identifier(tenant, "tenant")
    ready_priority(priority)


class SplitDurable(Generic[EffectT]):
    """`Durable` over any two stores: records first, then queues.

    Not atomic across the two: a crash between the write and the wakeup leaves a record with
    no wakeup (repaired by asking again; a repeated `deliver` appends a second message).
    """

    def __init__(self, checkpointer: Checkpointer[EffectT], scheduler: Scheduler) -> None:
        self._checkpointer = checkpointer
        self._scheduler = scheduler

    @property
    def checkpointer(self) -> Checkpointer[EffectT]:
        return self._checkpointer

    @property
    def scheduler(self) -> Scheduler:
        return self._scheduler

    async def arrive(
        self,
        workflow: str,
        key: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
    ) -> Recorded[object]:
        _tenant(tenant, priority)
        recorded = await self._checkpointer.supply(workflow, key, value)
        await self._scheduler.make_ready(workflow, tenant=tenant, priority=priority)
        return recorded

    async def deliver(
        self,
        workflow: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
        unless_finished: bool = False,
    ) -> Entry:
        _tenant(tenant, priority)
        entry = await self._checkpointer.append(workflow, value, unless_finished=unless_finished)
        await self._scheduler.make_ready(workflow, tenant=tenant, priority=priority)
        return entry

    async def delete(self, workflow: str) -> int:
        await self._scheduler.cancel(workflow)
        return await self._checkpointer.discard(workflow)

    async def close(self) -> None:
        """Close the checkpointer and the scheduler (idempotent)."""
        await self._checkpointer.close()
        await self._scheduler.close()


__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_NAMESPACE",
    "DEFAULT_PRIORITY",
    "DEFAULT_TENANT",
    "INBOX_PREFIX",
    "LAPSED_PER_TAKE",
    "MAX_NAMED_KEYS",
    "MAX_READY_BATCH",
    "Blocked",
    "Checkpointer",
    "Completed",
    "Delivery",
    "Durable",
    "Entry",
    "Finish",
    "Finishing",
    "Looking",
    "Outcome",
    "Pass",
    "Ready",
    "ReadyingMany",
    "Recorded",
    "Restart",
    "Scheduler",
    "Sleeping",
    "SplitDurable",
    "Written",
    "finish_workflow",
    "inbox_key",
    "is_inbox_key",
    "kept_prefixes",
    "look_at",
    "message_keys",
    "named_keys",
    "new_priority",
    "ready_batch",
    "ready_priority",
    "refuse_finished",
    "step_key",
    "value_refused",
    "workflow_batch",
    "written_records",
]
