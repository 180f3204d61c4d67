"""Runs and sessions: the records an agent loop keeps, and the `StateStore` protocol."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Protocol, Self, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    NonNegativeInt,
    field_validator,
    model_validator,
)

from durably.errors import InvalidInputError, StatePersistenceError
from durably.redaction import scrub
from durably.stores.codec import unsigned_zeros
from durably.stores.status import WorkflowStatus
from durably.validation import identifier, storable

if TYPE_CHECKING:
    from durably.stores.totals import RunTotals

_FROZEN = ConfigDict(frozen=True, strict=True, extra="forbid")


def _id(value: str, name: str) -> str:
    return identifier(value, name)


def _tuple(value: Any) -> Any:
    """A list where the model says tuple, as a tuple (JSON has only lists)."""
    return tuple(value) if isinstance(value, list) else value


Scrubber = Callable[[JsonValue], JsonValue]
"""What a run store applies to tool-call arguments before it stores them: a JSON value in,
the value to store out (`durably.redaction.scrub` masks secrets and e-mail addresses)."""


class RunState(StrEnum):
    """Where a run is. The last six are terminal."""

    PENDING = "pending"
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_EXHAUSTED = "budget_exhausted"
    MAX_ITERATIONS_EXCEEDED = "max_iterations_exceeded"
    LOOP_LIMIT_EXCEEDED = "loop_limit_exceeded"

    @property
    def terminal(self) -> bool:
        """Whether a run in this state will never run again."""
        return self not in _LIVE


_LIVE = frozenset({RunState.PENDING, RunState.RUNNING, RunState.SUSPENDED})
TERMINAL_STATES = frozenset(state for state in RunState if state.terminal)


FOLLOWS = "durably_workflow"
"""The metadata key of a run record the App opened for a workflow, holding the workflow's
engine key: every status write of that workflow (in the run's tenant) stores the run's
``state`` as `run_state` of the new status, in the same transaction, statement or script
(on Redis in the same pass, a second script), so a `StateStore` reader sees it."""

_STATES = {
    # Queued behind its kind's concurrency limit: not run yet, as a pending one.
    WorkflowStatus.QUEUED: RunState.PENDING,
    WorkflowStatus.PENDING: RunState.PENDING,
    WorkflowStatus.RUNNING: RunState.RUNNING,
    WorkflowStatus.SLEEPING: RunState.SUSPENDED,
    WorkflowStatus.BLOCKED: RunState.SUSPENDED,
    # Parked: stopped until an operator resumes it, which is a wait too.
    WorkflowStatus.PARKED: RunState.SUSPENDED,
    WorkflowStatus.COMPLETED: RunState.COMPLETED,
    WorkflowStatus.FAILED: RunState.FAILED,
    WorkflowStatus.CANCELLED: RunState.CANCELLED,
}


RUN_STATES = {status.value: state.value for status, state in _STATES.items()}
"""`run_state` as text to text (status to run state), for a store's upgrade statement."""


def run_state(status: WorkflowStatus | None) -> RunState:
    """The run state of a workflow whose status is ``status`` (None: no pass reported yet):
    sleeping, waiting and parked workflows are suspended."""
    return RunState.PENDING if status is None else _STATES[status]


def followed_workflow(record: RunRecord) -> str | None:
    """The engine key of the workflow whose status ``record`` follows (`FOLLOWS`), or None."""
    workflow = record.metadata.get(FOLLOWS)
    return workflow if isinstance(workflow, str) else None


def followed(record: RunRecord, state: RunState) -> RunRecord:
    """``record`` as a status write of its workflow moves it to ``state``.

    A new version (a compare-and-set writer holding the old one conflicts), its
    ``updated_at`` kept: that is the time of the record's own last write.
    """
    return record.model_copy(update={"state": state, "version": record.version + 1})


class StateKey(BaseModel):
    """Addresses a run or session; the tenant is part of every key."""

    model_config = _FROZEN
    tenant: str
    id: str

    @field_validator("tenant", "id")
    @classmethod
    def _valid(cls, value: str, info: object) -> str:
        return _id(value, getattr(info, "field_name", "id"))

    def __str__(self) -> str:
        return f"{self.tenant!r}/{self.id!r}"


class Usage(BaseModel):
    """Tokens and requests a run consumed; ``a + b`` adds field by field."""

    model_config = _FROZEN
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    cached_tokens: NonNegativeInt = 0
    cache_write_tokens: NonNegativeInt = 0
    reasoning_tokens: NonNegativeInt = 0
    requests: NonNegativeInt = 0
    tool_calls: NonNegativeInt = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in USAGE_FIELDS})

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


USAGE_FIELDS: tuple[str, ...] = tuple(Usage.model_fields)


class ToolCall(BaseModel):
    """A tool call the model asked for and the loop has not finished."""

    model_config = _FROZEN
    id: str
    name: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    idempotent: bool = False

    def scrubbed(self, scrubber: Scrubber = scrub) -> ToolCall:
        """This call with its arguments passed through ``scrubber`` (by default API keys,
        tokens and e-mail addresses masked): for logs, displays and exports, never for
        what a loop will execute."""
        arguments = scrubber(self.arguments)
        if not isinstance(arguments, dict):
            raise InvalidInputError(
                f"a scrubber must keep tool-call arguments a dict, got {type(arguments).__name__}"
            )
        return self.model_copy(update={"arguments": arguments})


class RunRecord(BaseModel):
    """One agent run. ``version`` is the version it was read at (0 = never stored)."""

    model_config = _FROZEN
    run_id: str
    tenant: str
    agent_name: str
    session_id: str | None = None
    state: RunState = RunState.PENDING
    version: NonNegativeInt = 0
    message_cursor: NonNegativeInt = 0
    pending_tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    cost_micros: NonNegativeInt = 0
    iterations: NonNegativeInt = 0
    awaiting_approval: str | None = None
    updated_at: float = 0.0
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    masked_paths: tuple[str, ...] = ()
    """Where the store's scrubber changed a tool call's arguments before storing them
    (``pending_tool_calls['call-1'].arguments.to``): a call named here must not be executed as
    stored. Empty when the store keeps arguments as given (its default)."""

    @field_validator("pending_tool_calls", "masked_paths", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _tuple(value)

    def masked(self, call_id: str) -> bool:
        """Whether the stored arguments of pending tool call ``call_id`` were masked."""
        head = call_path(call_id)
        return any(path.startswith(head) for path in self.masked_paths)

    def scrubbed(self, scrubber: Scrubber = scrub) -> RunRecord:
        """This record with its tool calls' arguments and its metadata passed through
        ``scrubber``: what logs, displays and exports show."""
        metadata = scrubber(self.metadata)
        return self.model_copy(
            update={
                "pending_tool_calls": tuple(c.scrubbed(scrubber) for c in self.pending_tool_calls),
                "metadata": metadata if isinstance(metadata, dict) else {},
            }
        )

    @field_validator("run_id", "tenant", "agent_name")
    @classmethod
    def _valid_ids(cls, value: str, info: object) -> str:
        return _id(value, getattr(info, "field_name", "id"))

    @field_validator("session_id")
    @classmethod
    def _valid_session(cls, value: str | None) -> str | None:
        return None if value is None else _id(value, "session_id")

    @property
    def key(self) -> StateKey:
        """The key this run is stored under."""
        return StateKey(tenant=self.tenant, id=self.run_id)


class SessionRecord(BaseModel):
    """A conversation holding several runs. ``runs`` is kept by the caller."""

    model_config = _FROZEN
    session_id: str
    tenant: str
    user: str | None = None
    version: NonNegativeInt = 0
    runs: tuple[str, ...] = ()
    updated_at: float = 0.0
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("runs", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _tuple(value)

    @field_validator("session_id", "tenant")
    @classmethod
    def _valid_ids(cls, value: str, info: object) -> str:
        return _id(value, getattr(info, "field_name", "id"))

    @property
    def key(self) -> StateKey:
        """The key this session is stored under."""
        return StateKey(tenant=self.tenant, id=self.session_id)


class StateDelta(BaseModel):
    """Amounts to add to a run (never values to set); negatives are refused."""

    model_config = _FROZEN
    usage: Usage = Usage()
    cost_micros: NonNegativeInt = 0
    iterations: NonNegativeInt = 0
    messages_read: NonNegativeInt = 0


class StateQuery(BaseModel):
    """A page request over one tenant's runs, ordered by creation."""

    model_config = _FROZEN
    tenant: str
    state: RunState | None = None
    updated_before: float | None = None
    limit: Annotated[int, Field(ge=1, le=1000)] = 50
    cursor: str | None = None

    @field_validator("tenant")
    @classmethod
    def _valid_tenant(cls, value: str) -> str:
        return _id(value, "tenant")

    @field_validator("updated_before")
    @classmethod
    def _comparable(cls, value: float | None) -> float | None:
        if value is not None and math.isnan(value):
            raise ValueError("updated_before must be a number, not NaN")
        return value


class StatePage(BaseModel):
    """One page of runs; ``cursor`` fetches the next page and is None on the last."""

    model_config = _FROZEN
    records: tuple[RunRecord, ...]
    cursor: str | None = None

    @field_validator("records", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _tuple(value)

    @model_validator(mode="after")
    def _cursor_needs_records(self) -> Self:
        if self.cursor is not None and not self.records:
            raise ValueError("a page with a cursor must hold records")
        return self


COUNTER_LIMIT = 2**63 - 1
"""The largest counter every backing keeps exactly: a signed 64-bit integer (PostgreSQL's
``bigint``, Redis's ``HINCRBY``)."""


def _counters(usage: Usage, cost_micros: int, iterations: int, cursor: int) -> dict[str, int]:
    counters = {f"usage.{name}": getattr(usage, name) for name in USAGE_FIELDS}
    counters.update(cost_micros=cost_micros, iterations=iterations, message_cursor=cursor)
    return counters


def _within_limit(counters: dict[str, int], what: str) -> None:
    for name, value in counters.items():
        if value > COUNTER_LIMIT:
            raise InvalidInputError(f"{what} {name}={value} is over {COUNTER_LIMIT}")


def checked_delta(delta: StateDelta) -> StateDelta:
    """``delta`` if no amount in it is over `COUNTER_LIMIT` (`InvalidInputError`)."""
    _within_limit(
        _counters(delta.usage, delta.cost_micros, delta.iterations, delta.messages_read),
        "patch amount",
    )
    return delta


def cursor_position(cursor: str | None) -> int:
    """The place among its tenant's runs a listing cursor names (0 for None): plain ASCII
    decimal digits up to `COUNTER_LIMIT`, as every store hands them out. Anything else (a
    sign, spaces, underscores, another script's digits) is `InvalidInputError`, before any
    I/O."""
    if cursor is None:
        return 0
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 19:
        raise InvalidInputError(f"cursor {cursor!r} was not handed out by a store")
    position = int(cursor)
    if position > COUNTER_LIMIT:
        raise InvalidInputError(f"cursor {cursor!r} was not handed out by a store")
    return position


def listing_start(query: StateQuery) -> int:
    """The creation sequence ``query`` lists after, once its tenant, its cursor
    (`cursor_position`) and its ``updated_before`` (NaN compares unlike on every backing)
    are found usable; `InvalidInputError` before any I/O otherwise, even for a query built
    with ``model_construct``."""
    identifier(query.tenant, "tenant")
    if query.updated_before is not None and math.isnan(query.updated_before):
        raise InvalidInputError("updated_before must be a number, not NaN")
    return cursor_position(query.cursor)


def checked_run(record: RunRecord) -> RunRecord:
    """``record`` if a store may keep it, as every backing checks before any I/O.

    Raises `InvalidInputError` for an empty or unusable id (even on a record built with
    ``model_construct``, which skips the validators), for a NUL or a lone surrogate in
    any other string of the record, for a NaN or infinite float in it (JSON has
    neither), and for a counter over `COUNTER_LIMIT`, which no backing stores alike.
    """
    _within_limit(
        _counters(record.usage, record.cost_micros, record.iterations, record.message_cursor),
        "run",
    )
    identifier(record.tenant, "tenant")
    identifier(record.run_id, "run_id")
    identifier(record.agent_name, "agent_name")
    if record.session_id is not None:
        identifier(record.session_id, "session_id")
    storable(record.awaiting_approval, "awaiting_approval")
    storable(record.metadata, "metadata")
    for call in record.pending_tool_calls:
        storable(call.id, "pending_tool_calls id")
        storable(call.name, "pending_tool_calls name")
        storable(call.arguments, "pending_tool_calls arguments")
    return record


def stored_run(
    record: RunRecord,
    *,
    version: int,
    updated_at: float,
    max_bytes: int | None = None,
    store: str = "memory",
    scrubber: Scrubber | None = None,
) -> RunRecord:
    """The record as a store keeps it: checked (`checked_run`), new version and time.

    Tool-call arguments are kept as given, so a loop resuming on another worker executes
    exactly what was asked. With a ``scrubber`` (a store's ``scrub=``) they pass through it
    first, and every path it changed is added to ``masked_paths``, so a loop can refuse to
    execute a masked call. With ``max_bytes`` (a store's ``max_value_bytes``), arguments
    whose text alone is over it are refused: `StatePersistenceError` from ``store`` with
    reason ``too_large``.
    """
    checked_run(record)
    if max_bytes is not None:
        size = sum(_text_length(call.arguments) for call in record.pending_tool_calls)
        if size > max_bytes:
            raise StatePersistenceError(
                store,
                "too_large",
                f"tool-call arguments of run {record.key} hold {size} characters of text,"
                f" over max_value_bytes={max_bytes}",
            )
    calls = record.pending_tool_calls
    # Masks of calls still pending stay (a record read back and stored again is not
    # scrubbed anew, so its masks would be lost otherwise).
    heads = tuple(call_path(call.id) for call in calls)
    masked = [path for path in record.masked_paths if path.startswith(heads)]
    if scrubber is not None:
        scrubbed = []
        for call in calls:
            clean = call.scrubbed(scrubber)
            storable(clean.arguments, "scrubbed pending_tool_calls arguments")
            for path in changed_paths(call.arguments, clean.arguments, call_path(call.id)):
                if path not in masked:
                    masked.append(path)
            scrubbed.append(clean)
        calls = tuple(scrubbed)
    return record.model_copy(
        update={
            "version": version,
            "updated_at": updated_at,
            "pending_tool_calls": tuple(_unsigned_call(call) for call in calls),
            "metadata": unsigned_zeros(record.metadata),
            "masked_paths": tuple(masked),
        }
    )


def call_path(call_id: str) -> str:
    """Where the arguments of pending tool call ``call_id`` start in ``masked_paths``."""
    return f"pending_tool_calls[{call_id!r}].arguments"


def changed_paths(before: object, after: object, path: str) -> list[str]:
    """The paths (``a.b[2]``) under ``path`` where ``after`` differs from ``before``."""
    if isinstance(before, dict) and isinstance(after, dict) and before.keys() == after.keys():
        return [
            found
            for key in before
            for found in changed_paths(before[key], after[key], f"{path}.{key}")
        ]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            found
            for place, (old, new) in enumerate(zip(before, after, strict=True))
            for found in changed_paths(old, new, f"{path}[{place}]")
        ]
    return [] if before == after and type(before) is type(after) else [path]


def _unsigned_call(call: ToolCall) -> ToolCall:
    """``call`` with its arguments' negative zeros as zeros (`unsigned_zeros`)."""
    arguments = unsigned_zeros(call.arguments)
    return call if arguments is call.arguments else call.model_copy(update={"arguments": arguments})


def _text_length(value: object) -> int:
    """How many characters of text ``value`` holds (a lower bound on its stored bytes)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(key) + _text_length(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return sum(_text_length(item) for item in value)
    return 0


def checked_session(record: SessionRecord) -> SessionRecord:
    """``record`` if a store may keep it; refuses what `checked_run` refuses."""
    identifier(record.tenant, "tenant")
    identifier(record.session_id, "session_id")
    storable(record.user, "user")
    storable(record.runs, "runs")
    storable(record.metadata, "metadata")
    return record


def stored_session(record: SessionRecord, *, version: int, updated_at: float) -> SessionRecord:
    """The session as a store keeps it: checked (`checked_session`), new version and time."""
    return checked_session(record).model_copy(
        update={
            "version": version,
            "updated_at": updated_at,
            "metadata": unsigned_zeros(record.metadata),
        }
    )


def patched_run(record: RunRecord, delta: StateDelta, *, updated_at: float) -> RunRecord:
    """``record`` with ``delta`` added and its version bumped (for stores holding blobs).

    Raises `InvalidInputError` if a sum would pass `COUNTER_LIMIT`, as PostgreSQL and
    Redis refuse it.
    """
    usage = record.usage + delta.usage
    cost_micros = record.cost_micros + delta.cost_micros
    iterations = record.iterations + delta.iterations
    cursor = record.message_cursor + delta.messages_read
    _within_limit(
        _counters(usage, cost_micros, iterations, cursor), f"patch of run {record.key}: the sum"
    )
    return record.model_copy(
        update={
            "version": record.version + 1,
            "updated_at": updated_at,
            "usage": usage,
            "cost_micros": cost_micros,
            "iterations": iterations,
            "message_cursor": cursor,
        }
    )


@runtime_checkable
class StateStore(Protocol):
    """Versioned run and session records with compare-and-set writes and additive patches."""

    async def get_run(self, key: StateKey) -> RunRecord | None:
        """The run at ``key``, or None."""
        ...

    async def close(self) -> None:
        """Release what the store holds of its own; a pool, client or database passed in
        stays open for its owner. Idempotent."""
        ...

    async def put_run(self, record: RunRecord) -> RunRecord:
        """Store ``record`` if the stored version equals ``record.version`` (absent = 0).

        Returns the stored record at ``version + 1``; raises `StateConflictError`.
        """
        ...

    async def patch_run(self, key: StateKey, delta: StateDelta) -> RunRecord:
        """Add ``delta`` server-side, bump the version, return the merged record.

        Raises `StateNotFoundError` for an absent run.
        """
        ...

    async def delete_run(self, key: StateKey) -> bool:
        """Delete the run; False if there was none."""
        ...

    async def list_runs(self, query: StateQuery) -> StatePage:
        """One page of the tenant's runs in creation order."""
        ...

    async def tenants(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Tenants that have at least one run, in code point order: those after ``after``,
        at most ``limit`` (1 to 10,000). For operators (``durably runs list`` without
        ``--tenant``), not a hot path."""
        ...

    async def tenant_totals(
        self, tenants: Sequence[str] | None = None, *, after: str | None = None, limit: int = 100
    ) -> list[RunTotals]:
        """The run totals of each of ``tenants`` that has runs, or (None) of the first
        ``limit`` tenants with runs after ``after``, in code point order: exact, kept by
        the store with every run write, and read in a bounded number of rows whatever the
        tenants hold. ``limit`` is 1 to 1,000 and bounds ``tenants`` too."""
        ...

    async def get_session(self, key: StateKey) -> SessionRecord | None:
        """The session at ``key``, or None."""
        ...

    async def put_session(self, record: SessionRecord) -> SessionRecord:
        """Compare-and-set write of a session, as `put_run`."""
        ...

    async def delete_session(self, key: StateKey, *, cascade: bool = False) -> bool:
        """Delete a session; `StateInUseError` while one of its runs is live unless
        ``cascade``, which deletes its runs too. False if there was no session."""
        ...


MAX_CREATE_BATCH = 1000
"""The most run records one `CreatingRuns.create_runs` call stores."""


@runtime_checkable
class CreatingRuns(Protocol):
    """The optional `StateStore` capability of creating many run records in one write (a
    bulk start opening its workflows' runs). Every shipped state store has it."""

    async def create_runs(self, records: Sequence[RunRecord]) -> list[bool]:
        """Store each record (each of version 0) whose run does not exist yet, as
        `put_run` would, in one write: per record, in order, whether it was stored (a run
        that exists is left as it is, and False). At most `MAX_CREATE_BATCH`
        (`InvalidInputError`, before any I/O: a record of another version, two of one
        run)."""
        ...


def create_batch(records: object) -> list[RunRecord]:
    """The records of a `CreatingRuns.create_runs` call, checked before any I/O."""
    if isinstance(records, (str, bytes)) or not isinstance(records, Sequence):
        raise InvalidInputError(
            f"records must be a sequence of RunRecord, got {type(records).__name__}"
        )
    if len(records) > MAX_CREATE_BATCH:
        raise InvalidInputError(
            f"records must be at most {MAX_CREATE_BATCH} a call, got {len(records)}"
        )
    seen: set[tuple[str, str]] = set()
    for record in records:
        if not isinstance(record, RunRecord):
            raise InvalidInputError(f"each record must be a RunRecord, got {record!r}")
        if record.version != 0:
            raise InvalidInputError(
                f"run {record.key}: create_runs stores new runs (version 0), got version "
                f"{record.version}"
            )
        key = (record.tenant, record.run_id)
        if key in seen:
            raise InvalidInputError(f"run {record.key} is named twice")
        seen.add(key)
    return list(records)


__all__ = [
    "COUNTER_LIMIT",
    "FOLLOWS",
    "MAX_CREATE_BATCH",
    "RUN_STATES",
    "TERMINAL_STATES",
    "USAGE_FIELDS",
    "CreatingRuns",
    "RunRecord",
    "RunState",
    "Scrubber",
    "SessionRecord",
    "StateDelta",
    "StateKey",
    "StatePage",
    "StateQuery",
    "StateStore",
    "ToolCall",
    "Usage",
    "call_path",
    "changed_paths",
    "checked_delta",
    "checked_run",
    "checked_session",
    "create_batch",
    "cursor_position",
    "followed",
    "followed_workflow",
    "listing_start",
    "patched_run",
    "run_state",
    "stored_run",
    "stored_session",
]
