"""The records the application layer keeps in a workflow's checkpoint, and their keys.

Every key the App writes itself starts with ``durably:``; step names and inline step keys
may not, so a user's record never collides with one of these.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from durably.app._values import stored_text
from durably.errors import (
    ConfigurationError,
    IncompatibleRecordError,
    InvalidInputError,
    StepFailedError,
    UnreadableRecordError,
)
from durably.otel.tracing import START_FIELD, current_carrier
from durably.redaction import mend_text
from durably.stores.workflows import DEFAULT_PRIORITY, INBOX_PREFIX, Checkpointer
from durably.validation import MAX_ID_BYTES, identifier

PREFIX = "durably:"
START = "durably:start"
"""The start record: kind, encoded arguments, tenant, parent (its id, kind and key),
created, timeout, depth, and the run (1, plus one per `Context.continue_as_new`, which
rewrites it; absent: 1)."""
START_TRACE = START_FIELD
"""The start record's field holding the trace context of the code that started it."""
START_CALL = "writer"
"""The start record's field holding a random token of the call that wrote it (named to
sort last, after what a reader looks for)."""
RESULT = "durably:result"
"""The encoded return value: written with the COMPLETED status in one write
(`durably.workflows.Finish`), or by a child before it wakes its parent."""
CANCEL = "durably:cancel"
"""The cancellation markers `WorkflowHandle.cancel` supplies, one per resume generation."""
FAILED = "durably:failed"
"""``durably:failed#G``: the failure that ended resume generation G (wakes a parent):
`failure`'s record, or (written before failures kept their type) its text alone."""
CANCELLED = "durably:cancelled"
TIMED_OUT = "timed out"
"""What a `CANCELLED` record holds when the workflow's ``timeout=`` ended it."""
"""``durably:cancelled#G``: generation G ended cancelled (wakes a parent)."""
CHILD = "durably:child:"
"""``durably:child:KIND#N``: the id and key of the N-th child of KIND a body started."""
STARTED = "durably:start:"
"""``durably:start:KIND#N``: the id and key of the N-th workflow of KIND a body started
(no child)."""
BEGINS = "durably:begins"
"""The durable sleep of a delayed start (``start(delay=)``/``start(at=)``) before its
body begins: its deadline, as a sleep records one."""
DEBOUNCED = "durably:debounced"
"""``durably:debounced#N``: what a debounced workflow's N-th ask to begin was answered (the
arguments to run with, or when to ask again); ``durably:debounced:wait#N`` its sleep;
``durably:debounced:released`` the deletion of the slot it took."""
RELEASED = f"{DEBOUNCED}:released"
TIMEOUT = "durably:timeout"
"""The wakeup at a workflow's ``timeout`` deadline (never recorded)."""
RESUMES = "durably:resume"
"""The markers `WorkflowHandle.resume` supplies (``durably:resume#1``, ...)."""
PRIORITY = "durably:priority#"
"""``durably:priority#N``: the priority the N-th `WorkflowHandle.set_priority` moved the
workflow to; the highest N is the one it is served at (`priority_of`)."""
PRIORITY_WINDOW = 4
"""How many of those a reader that names keys asks for at once (`priority_keys`)."""
FORK = "durably:fork#"
"""``durably:fork#N``: the N-th fork made of this workflow (`WorkflowHandle.fork`): the
fork's id and the step it re-ran from."""
EVENT = "durably:event:"
"""``durably:event:KEY#N``: the N-th value `Context.set_event` published under KEY."""
RECV = "durably:recv:"
"""``durably:recv:TOPIC#N``: what the N-th `recv` on TOPIC took: ``{"m": message key,
"v": its value}`` (the value kept, so the message itself can be deleted once this lands),
``{"m": message key}`` as written before values were kept (the message is then kept
too), or ``{"t": True}`` for a timeout."""
RESUME_PREFIX = f"{RESUMES}#"
"""What every resume marker's key starts with: their count gives the generation."""
KEPT_ACROSS_RUNS = (INBOX_PREFIX, f"{CANCEL}#", RESUME_PREFIX, FORK, PRIORITY)
"""What `Context.continue_as_new` keeps of a workflow's records for its next run: the
messages not yet consumed, the cancel and resume markers (a cancel asked while the run
ended still stops the next one), and the priority it was moved to."""


def received(message: str, data: object) -> dict[str, object]:
    """The record of a `recv` that took the message under key ``message``, whose value
    (its ``"value"`` field) is ``data``."""
    return {"m": message, "v": data}


def taken_message(record: object) -> str | None:
    """The key of the message a `recv` record took, or None (a timeout, or not a
    `recv` record)."""
    if isinstance(record, dict) and "m" in record:
        return str(record["m"])
    return None


def consumed_messages(stored: Mapping[str, object]) -> list[str]:
    """The keys of the stored messages a `recv` record of ``stored`` took (both record
    forms): what a new run must not take again."""
    taken = (taken_message(value) for key, value in stored.items() if key.startswith(RECV))
    return [key for key in dict.fromkeys(taken) if key is not None and key in stored]


def occurrence(name: str, count: int) -> str:
    """The key of the ``count``-th call (from 1) of ``name`` in a body."""
    return f"{name}#{count}"


def generation(stored: Mapping[str, object]) -> int:
    """The workflow's resume generation: 1, plus one per resume."""
    return 1 + sum(1 for key in stored if key.startswith(RESUME_PREFIX))


def cancel_key(generation: int) -> str:
    """The cancellation marker of resume generation ``generation``."""
    return occurrence(CANCEL, generation)


PLACE = "@"
"""What separates a step record's argument digest from the call's position in the body's
sequence (``"a": "<digest>@<position>"``, for a call the body's own task made)."""

RETRY = ":retry#"
"""What every `retry_key` holds."""


def retry_key(step_key: str, attempt: int) -> str:
    """The deadline of the durable backoff after failed attempt ``attempt`` of a step."""
    return f"{step_key}{RETRY}{attempt}"


def instant(key: str) -> bool:
    """Whether the App's record at ``key`` holds an instant (epoch seconds): a sleep's or
    a ``recv``'s deadline, a step retry's (`retry_key`), or a recorded ``ctx.now()``."""
    if key.startswith(PREFIX):
        name = key[len(PREFIX) :]
        return (
            name.startswith(("sleep#", "now#"))
            or (name.startswith("recv:") and key.endswith(":deadline"))
            or RETRY in key
        )
    return RETRY in key


START_INSTANTS = ("created", "timeout_at", "not_before")
"""The fields of a `START` record that hold instants (epoch seconds)."""


def event_key(key: str, count: int) -> str:
    """The record of the ``count``-th `set_event` of ``key``."""
    return occurrence(f"{EVENT}{key}", count)


def announced(key: str) -> bool:
    """Whether the store announces a record a pass writes under ``key`` to waiting
    handles: events alone, the only records a handle waits for (`get_event`); a step's
    record wakes nobody, and an announcement costs every notifying commit on PostgreSQL
    and every subscriber on Redis."""
    return key.startswith(EVENT)


def latest_event(records: dict[str, object], key: str) -> tuple[bool, object]:
    """Whether ``key`` has an event, and its latest value (the highest occurrence)."""
    prefix = f"{EVENT}{key}#"
    best = 0
    found: object = None
    for name, value in records.items():
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            number = int(name[len(prefix) :])
            if number > best:
                best, found = number, value
    return best > 0, found


def bookkeeping(key: str) -> bool:
    """Whether ``key`` is the App's own bookkeeping (start, result, endings, cancel,
    resume, inbox messages) rather than work a body recorded."""
    return key in (START, RESULT) or key.startswith(
        (CANCEL, RESUMES, FAILED, CANCELLED, FORK, PRIORITY, "inbox:")
    )


def survey(stored: Mapping[str, object]) -> tuple[int, set[str], bool, bool, int]:
    """What a pass needs to know of its records, in one look at their keys: the resume
    generation (`generation`), the keys a body recorded (every key but `bookkeeping`),
    whether any step's retry deadline is among them (`retry_key`), whether a
    generation's end (failed or cancelled) is recorded (without one, and without a
    `RESULT`, `ending` is None), and how many messages are stored."""
    current = 1
    recorded: set[str] = set()
    retries = ended = False
    messages = 0
    for key in stored:
        if RETRY in key:
            retries = True
        if not key.startswith(PREFIX):
            if key.startswith(INBOX_PREFIX):
                messages += 1
            else:
                recorded.add(key)
        elif key.startswith(RESUME_PREFIX):
            current += 1
        elif key.startswith((FAILED, CANCELLED)):
            ended = True
        elif not (key in (START, RESULT) or key.startswith((CANCEL, RESUMES, FORK, PRIORITY))):
            recorded.add(key)
    return current, recorded, retries, ended, messages


def user_key(key: str, what: str) -> str:
    """``key`` if a user may name a record with it: `ConfigurationError` for one in the
    key space of durably's own records or of messages (``inbox:``)."""
    for reserved in (PREFIX, INBOX_PREFIX):
        if key.startswith(reserved):
            raise ConfigurationError(
                f"{what} {key!r}: names starting with {reserved!r} are reserved"
            )
    return key


NAME_BYTES = 400
"""The longest name of a step, workflow kind, topic or event, in UTF-8 bytes. The record
keys made from a name add a prefix (``durably:child:``, at most 14 bytes) and a suffix (the
call's occurrence, ``:deadline``, ``:end``, a retry's number), and every key must fit in
`MAX_ID_BYTES`: a longer name would pass registration and fail its workflow mid-run."""
KEYED_BYTES = MAX_ID_BYTES - 32
"""The longest explicit step key (``name[key]``, `Step.keyed`): room for a retry's suffix."""


def bounded(value: object, what: str, most: int = NAME_BYTES) -> str:
    """``value`` if it may name a workflow kind, topic or event: an `identifier` of at most
    ``most`` bytes; `InvalidInputError` naming ``what`` otherwise."""
    text = identifier(value, what)
    if len(text) > most >> 2 and len(text.encode()) > most:
        raise InvalidInputError(
            f"{what} {text[:40]!r}… must be at most {most} bytes in UTF-8 (the keys of "
            "its records add to it)"
        )
    return text


def start_record(
    *,
    kind: str,
    args: dict[str, object],
    tenant: str,
    created: float,
    parent: str | None = None,
    parent_kind: str | None = None,
    parent_key: str | None = None,
    timeout_at: float | None = None,
    depth: int = 0,
    not_before: float | None = None,
    gate: str | None = None,
    priority: int = DEFAULT_PRIORITY,
    parent_priority: int = DEFAULT_PRIORITY,
) -> dict[str, Any]:
    """What `start` supplies under `START` (first writer wins). A child's ``parent`` is
    its parent's id (in the same tenant) and ``parent_key`` the key its end wakes.
    ``depth`` counts the workflow bodies that started it, one above another (0: started
    from outside one); ``not_before`` is when its body may begin (a delayed start);
    ``gate`` is the concurrency gate it is admitted through (its kind, or kind:key);
    ``priority`` the one it is served at, ``parent_priority`` its parent's (each kept
    only when not NORMAL), so every wakeup names them.

    Each record carries a token of its own call (`START_CALL`): the store answers a retried
    write of the very bytes it holds as the first, so two calls must never write the same
    bytes, even at one instant of a still clock.
    """
    record: dict[str, Any] = {
        START_CALL: secrets.token_hex(8),
        "kind": kind,
        "args": args,
        "tenant": tenant,
        "created": created,
        "parent": parent,
        "parent_kind": parent_kind,
        "timeout_at": timeout_at,
        "depth": depth,
    }
    if parent_key is not None:
        record["parent_key"] = parent_key
    if not_before is not None:
        record["not_before"] = not_before
    if gate is not None:
        record["gate"] = gate
    if priority != DEFAULT_PRIORITY:
        record["priority"] = priority
    if parent_priority != DEFAULT_PRIORITY:
        record["parent_priority"] = parent_priority
    carrier = current_carrier()
    if carrier is not None:  # the trace that started it goes on in its passes
        record[START_TRACE] = carrier
    return record


def describe(records: Mapping[str, object]) -> tuple[str | None, Mapping[str, object] | None]:
    """A workflow's tenant and the trace context its start stored (`START_TRACE`), from
    its records; None for either when the start record does not say."""
    start = records.get(START)
    if not isinstance(start, dict):
        return None, None
    tenant = start.get("tenant")
    carrier = start.get(START_TRACE)
    return (
        tenant if isinstance(tenant, str) else None,
        carrier if isinstance(carrier, dict) else None,
    )


def parent_key(start: Mapping[str, object]) -> str | None:
    """The key of the workflow a child's end wakes: its recorded ``parent_key``, or (a
    child started before tenants scoped ids) its parent's id, which was its key then."""
    key = start.get("parent_key", start.get("parent"))
    return None if key is None else str(key)


def tenant_of(stored: Mapping[str, object]) -> str | None:
    """The tenant a workflow's start record names, None without one: the tenant its
    wakeups are served for."""
    start = stored.get(START)
    tenant = start.get("tenant") if isinstance(start, dict) else None
    return tenant if isinstance(tenant, str) else None


def priority_of(stored: Mapping[str, object], start: object = None) -> int:
    """The priority a workflow is served at, from its records ``stored``: the last
    `PRIORITY` record, else what its start record names (``start``, or the one in
    ``stored``; NORMAL without one)."""
    changed = latest_priority(stored)
    if changed is not None:
        return changed
    return start_priority(stored.get(START) if start is None else start)


def latest_priority(stored: Mapping[str, object]) -> int | None:
    """The priority the last `PRIORITY` record in ``stored`` names (None: none)."""
    latest: int | None = None
    for n in itertools.count(1):
        found = stored.get(priority_key(n), _MISSING)
        if found is _MISSING:
            break
        if type(found) is int:
            latest = found
    return latest


def priority_key(n: int) -> str:
    """The key of the ``n``-th priority change (from 1)."""
    return f"{PRIORITY}{n}"


def priority_keys(first: int) -> list[str]:
    """The keys of `PRIORITY_WINDOW` priority changes from the ``first``-th on."""
    return [priority_key(n) for n in range(first, first + PRIORITY_WINDOW)]


async def changed_priority(
    checkpointer: Checkpointer[Any], workflow: str, found: Mapping[str, object] | None = None
) -> int | None:
    """The priority the last `PRIORITY` record of ``workflow`` names (None: none), read by
    name: ``found`` is what a read of ``priority_keys(1)`` answered (None: read them
    here); further windows are read only while each is full."""
    return (await priority_changes(checkpointer, workflow, found))[1]


async def priority_changes(
    checkpointer: Checkpointer[Any], workflow: str, found: Mapping[str, object] | None = None
) -> tuple[int, int | None]:
    """How many `PRIORITY` records ``workflow`` has, and the priority the last names
    (None: none); read as `changed_priority` reads them."""
    first, latest = 1, None
    if found is None:
        found = await checkpointer.peek(workflow, priority_keys(first))
    while True:
        for n, key in enumerate(priority_keys(first), start=first):
            changed = found.get(key, _MISSING)
            if changed is _MISSING:
                return n - 1, latest
            if type(changed) is int:
                latest = changed
        first += PRIORITY_WINDOW
        found = await checkpointer.peek(workflow, priority_keys(first))


_MISSING = object()


def start_priority(start: object, field: str = "priority") -> int:
    """The priority start record ``start`` names (NORMAL without one); with
    ``field="parent_priority"``, its parent's."""
    found = start.get(field) if isinstance(start, dict) else None
    return found if type(found) is int else DEFAULT_PRIORITY


def depth_of(start: Mapping[str, object]) -> int:
    """How many workflow bodies, one above another, started the workflow of ``start``
    (0 for a start record written before depths were kept)."""
    depth = start.get("depth", 0)
    return depth if isinstance(depth, int) and depth >= 0 else 0


# What each field of a start record holds (`start_record`): its types, None allowed or not.
_START_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "kind": ((str,), False),
    "args": ((dict,), False),
    "tenant": ((str,), False),
    "created": ((int, float), False),
    "parent": ((str,), True),
    "parent_kind": ((str,), True),
    "parent_key": ((str,), True),
    "timeout_at": ((int, float), True),
    "depth": ((int,), True),
    "not_before": ((int, float), True),
    "debounce": ((str,), True),
    "gate": ((str,), True),
}


def read_start(stored: Mapping[str, object], workflow: str) -> dict[str, Any] | None:
    """``workflow``'s start record from its records, checked to be what `start_record`
    writes (None when there is none: not started through an App). Raises
    `IncompatibleRecordError` at `START` for one of another shape (written by something
    else): a workflow cannot run, nor be described, from it."""
    start = stored.get(START)
    if start is None:
        return None
    flaw = _start_flaw(start)
    if flaw is not None:
        raise IncompatibleRecordError(workflow, START, "start record", stored_text(start), flaw)
    return start  # type: ignore[return-value]


def _start_flaw(start: object) -> str | None:
    if not isinstance(start, dict):
        return f"it is {type(start).__name__}, not an object"
    for field, (types, optional) in _START_FIELDS.items():
        value = start.get(field)
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            return f"its {field!r} is {type(value).__name__}"
    for field in START_INSTANTS:
        moment = start.get(field)
        if moment is not None:
            try:
                datetime.fromtimestamp(moment, UTC)
            except (ValueError, OverflowError, OSError):
                return f"its {field!r} is not a time"
    return None


async def readable(
    checkpointer: Checkpointer[Any], key: str, *needed: str, prefix: str | None = None
) -> dict[str, object]:
    """The records of the workflow keyed ``key``, read around any that cannot be read (the
    others still describe it) unless it is the start record, one of the keys ``needed`` or
    one starting with ``prefix``: `UnreadableRecordError` then."""
    try:
        return await checkpointer.load(key)
    except UnreadableRecordError as exc:
        for unread in exc.unreadable:
            if unread in (START, *needed) or (prefix is not None and unread.startswith(prefix)):
                raise
        return exc.readable


def end_key(key: str) -> str:
    """Where a parent records how the child it started under ``key`` ended."""
    return f"{key}:end"


def failure(error: BaseException) -> dict[str, object]:
    """The `FAILED` record of ``error``, which ended a generation.

    Its text (the error's repr, as the workflow's status keeps it), type name and message,
    and the key of the step whose failure it is (None when the body raised on its own);
    for a step's failure, the type and message of the step's own error. Text is kept as
    failure text is (`mend_text`: bounded, secrets masked).
    """
    if isinstance(error, StepFailedError):
        kind, message, step = error.error_type, error.error_message, error.key
    else:
        kind, message, step = type(error).__name__, str(error), None
    return {
        "error": mend_text(repr(error), "error"),
        "type": mend_text(kind, "error type"),
        "message": mend_text(message, "error"),
        "step": step,
    }


def ending(stored: Mapping[str, object]) -> dict[str, object] | None:
    """How a workflow's latest generation ended, from its records: ``{"v": result}``,
    ``{"e": error}`` (with its ``type``, ``message`` and ``step`` when its record keeps
    them, `failure`) or ``{"e": "cancelled", "cancelled": True}`` (``"timed out"`` for a
    workflow its ``timeout=`` cancelled); None while it runs."""
    if RESULT in stored:
        return {"v": stored[RESULT]}
    current = generation(stored)
    failed = stored.get(occurrence(FAILED, current))
    if isinstance(failed, dict):
        return {"e": str(failed.get("error")), **{k: failed.get(k) for k in _DETAILS}}
    if failed is not None:
        return {"e": str(failed)}
    cancelled = stored.get(occurrence(CANCELLED, current))
    if cancelled is not None:
        return {"e": TIMED_OUT if cancelled == TIMED_OUT else "cancelled", "cancelled": True}
    return None


_DETAILS = ("type", "message", "step")


def failure_details(ended: Mapping[str, object]) -> dict[str, str | None]:
    """The ``type``, ``message`` and ``step`` an `ending` (or a record of one) gives.

    Each None where it does not say: a failure recorded before failures kept their type.
    """
    return {k: None if ended.get(k) is None else str(ended.get(k)) for k in _DETAILS}


def started_key(started: Mapping[str, object], id: str) -> str:
    """The key of the workflow a `CHILD` or `STARTED` record names (one recorded before
    tenants scoped ids holds only the id, which was the key then)."""
    return str(started.get("key", started.get("id", id)))


def children(stored: Mapping[str, object]) -> list[str]:
    """The keys of the children a workflow started (recorded under `CHILD` keys)."""
    found: list[str] = []
    for key, value in stored.items():
        if key.startswith(CHILD) and not key.endswith(":end") and isinstance(value, dict):
            child = value.get("key", value.get("id"))
            if child is not None:
                found.append(str(child))
    return found


def recorded_kind(stored: Mapping[str, object]) -> str | None:
    """The kind a workflow's start record names (a workflow the App started), or None."""
    start = stored.get(START)
    kind = start.get("kind") if isinstance(start, dict) else None
    return kind if isinstance(kind, str) else None


__all__ = [
    "CANCEL",
    "CANCELLED",
    "CHILD",
    "EVENT",
    "FAILED",
    "KEPT_ACROSS_RUNS",
    "PLACE",
    "PREFIX",
    "RECV",
    "RESULT",
    "RESUMES",
    "RESUME_PREFIX",
    "START",
    "STARTED",
    "START_INSTANTS",
    "START_TRACE",
    "TIMEOUT",
    "bookkeeping",
    "cancel_key",
    "children",
    "consumed_messages",
    "describe",
    "end_key",
    "ending",
    "event_key",
    "failure",
    "failure_details",
    "generation",
    "instant",
    "latest_event",
    "occurrence",
    "parent_key",
    "read_start",
    "readable",
    "received",
    "recorded_kind",
    "retry_key",
    "start_record",
    "started_key",
    "survey",
    "taken_message",
    "user_key",
]
