"""Work items handed out under leases: the models, `QueuePolicy` and the `WorkQueue` protocol."""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from json.encoder import encode_basestring
from typing import Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, field_validator

from durably.errors import InvalidInputError
from durably.redaction import mend_text
from durably.stores.flow import Throttle, flow_limit
from durably.stores.throughput import Minute
from durably.validation import finite, identifier, positive, positive_int, storable_json

DEFAULT_QUEUE = "default"


# Fairness, the one order every backing applies to `claim`:
#   1. among tenants with a due item in the queue, the one whose turn is lowest (a tenant
#      never served has turn 0; ties go to the tenant with the oldest due item);
#   2. serving a tenant sets its turn above every other turn of the queue (to the back);
#   3. within the tenant, the highest priority, then the earliest available_at, then the
#      earliest enqueued (an enqueue sequence breaks exact ties).


class WorkPriority(IntEnum):
    """Orders work within one tenant only; tenants are served in rotation regardless."""

    LOW = 10
    NORMAL = 20
    HIGH = 30
    URGENT = 40


class WorkState(StrEnum):
    """Where a work item is."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    DEAD_LETTERED = "dead_lettered"

    @property
    def terminal(self) -> bool:
        """Completed and dead-lettered items free their id and dedupe key."""
        return self in (WorkState.COMPLETED, WorkState.DEAD_LETTERED)


class WorkItem(BaseModel):
    """A unit of work. ``id`` is unique within its tenant while the item is live."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    id: str
    tenant: str
    queue: str = DEFAULT_QUEUE
    payload: dict[str, str] = Field(default_factory=dict)
    priority: WorkPriority = WorkPriority.NORMAL
    dedupe_key: str | None = None
    attempts: NonNegativeInt = 0
    state: WorkState = WorkState.QUEUED
    worker: str | None = None
    enqueued_at: float | None = None
    available_at: float | None = None
    lease_expires_at: float | None = None
    first_claimed_at: float | None = None
    claimed_at: float | None = None
    failures: tuple[str, ...] = ()
    # Flow control (`durably.stores.flow`), set together or not at all: `flow_fields`.
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    throttle_key: str | None = None
    throttle_seconds: float | None = None
    throttle_burst: int | None = None

    # One validator a field, without pydantic's info argument (built per call otherwise):
    # every enqueue's caller builds an item.
    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return identifier(value, "id")

    @field_validator("tenant")
    @classmethod
    def _valid_tenant(cls, value: str) -> str:
        return identifier(value, "tenant")

    @field_validator("queue")
    @classmethod
    def _valid_queue(cls, value: str) -> str:
        return identifier(value, "queue")

    @field_validator("dedupe_key")
    @classmethod
    def _valid_dedupe(cls, value: str | None) -> str | None:
        return None if value is None else identifier(value, "dedupe_key")

    @field_validator("priority", mode="before")
    @classmethod
    def _priority(cls, value: object) -> object:
        # Strict mode refuses a plain int for an IntEnum; accept the four known values.
        if isinstance(value, int) and not isinstance(value, WorkPriority):
            return WorkPriority(value)
        return value


# What `model_construct` sets on a model, set directly: the hot paths (every enqueue's
# reply, every claimed or settled item read back) skip its per-call walk over the fields'
# defaults and pydantic's `__copy__`.
_ALL_FIELDS = frozenset(WorkItem.model_fields)
_new = object.__new__
_set = object.__setattr__


def _built(fields: dict[str, object], fields_set: set[str]) -> WorkItem:
    item: WorkItem = _new(WorkItem)
    _set(item, "__dict__", fields)
    _set(item, "__pydantic_fields_set__", fields_set)
    _set(item, "__pydantic_extra__", None)
    _set(item, "__pydantic_private__", None)
    return item


def checked_item(item: WorkItem) -> WorkItem:
    """``item`` once its ids and its ``available_at`` (a finite instant) are checked, as
    every backing does before any I/O: an item built with ``model_construct`` skips the
    validators. Raises `InvalidInputError`."""
    identifier(item.tenant, "tenant")
    identifier(item.id, "item_id")
    identifier(item.queue, "queue")
    if item.dedupe_key is not None:
        identifier(item.dedupe_key, "dedupe_key")
    if item.available_at is not None:
        # NaN or an infinity orders against no clock reading: never due, or a store error.
        finite(item.available_at, "available_at")
    # A priority or attempts count no reader takes back would jam its queue (a claim, a
    # reap or a listing that meets the stored row fails).
    if type(item.priority) is not WorkPriority and (
        type(item.priority) is not int or item.priority not in _PRIORITY_VALUES
    ):
        raise InvalidInputError(f"priority must be a WorkPriority, got {item.priority!r}")
    if type(item.attempts) is not int or item.attempts < 0:
        raise InvalidInputError(f"attempts must be a non-negative int, got {item.attempts!r}")
    if item.concurrency_key is not None or item.concurrency_limit is not None:
        _checked_concurrency(item.concurrency_key, item.concurrency_limit)
    if (
        item.throttle_key is not None
        or item.throttle_seconds is not None
        or item.throttle_burst is not None
    ):
        _checked_throttle(item.throttle_key, item.throttle_seconds, item.throttle_burst)
    return item


def _checked_concurrency(key: object, limit: object) -> tuple[str, int]:
    if key is None or limit is None:
        raise InvalidInputError("concurrency_key and concurrency_limit go together")
    return identifier(key, "concurrency_key"), flow_limit(limit, "concurrency_limit")


def _checked_throttle(key: object, seconds: object, burst: object) -> None:
    if key is None or seconds is None or burst is None:
        raise InvalidInputError("throttle_key, throttle_seconds and throttle_burst go together")
    identifier(key, "throttle_key")
    if type(seconds) is not float or not math.isfinite(seconds) or seconds <= 0:
        raise InvalidInputError(f"throttle_seconds must be a positive float, got {seconds!r}")
    flow_limit(burst, "throttle_burst")


class FlowFields(TypedDict, total=False):
    """The `WorkItem` fields of its flow gates (`flow_fields`)."""

    concurrency_key: str
    concurrency_limit: int
    throttle_key: str
    throttle_seconds: float
    throttle_burst: int


def tick_mark(name: str, tick: float) -> tuple[str, float]:
    """The arguments of an ``advance_tick`` call, checked before any I/O: a schedule name
    and a finite instant. Raises `InvalidInputError`."""
    return identifier(name, "schedule"), finite(tick, "tick")


def flow_fields(
    *,
    concurrency_key: str | None = None,
    concurrency_limit: int | None = None,
    throttle: Throttle | None = None,
    throttle_key: str | None = None,
) -> FlowFields:
    """The `WorkItem` fields that put an item under flow control, checked before any I/O:
    at most ``concurrency_limit`` items of ``concurrency_key`` run at once in a queue, and
    items of ``throttle_key`` start at ``throttle``'s rate. Raises `InvalidInputError`
    naming the argument (a limit below 1, a key given without its limit or rate)."""
    fields: FlowFields = {}
    if concurrency_key is not None or concurrency_limit is not None:
        key, limit = _checked_concurrency(concurrency_key, concurrency_limit)
        fields["concurrency_key"] = key
        fields["concurrency_limit"] = limit
    if throttle is not None or throttle_key is not None:
        if not isinstance(throttle, Throttle):
            raise InvalidInputError(f"throttle must be a Throttle, got {throttle!r}")
        fields["throttle_key"] = identifier(throttle_key, "throttle_key")
        fields["throttle_seconds"] = throttle.interval
        fields["throttle_burst"] = throttle.burst
    return fields


_PRIORITY_VALUES = frozenset(int(priority) for priority in WorkPriority)


DEDUPE_TTL_MOST = 366 * 86_400.0
"""The longest ``dedupe_ttl`` an enqueue takes, in seconds: a year and a day."""
DEDUPE_SWEEP_BATCH = 500
"""The most expired dedupe keys one `WorkQueue.reap` forgets (through an index by expiry)."""


def dedupe_window(dedupe_ttl: object) -> float | None:
    """``dedupe_ttl`` of an enqueue, checked before any I/O: None or a positive number of
    seconds up to `DEDUPE_TTL_MOST`. Raises `InvalidInputError`."""
    if dedupe_ttl is None:
        return None
    if isinstance(dedupe_ttl, bool) or not isinstance(dedupe_ttl, int | float):
        raise InvalidInputError(f"dedupe_ttl must be a number of seconds, got {dedupe_ttl!r}")
    seconds = positive(float(dedupe_ttl), "dedupe_ttl")
    if seconds > DEDUPE_TTL_MOST:
        raise InvalidInputError(f"dedupe_ttl must be at most a year, got {dedupe_ttl!r}")
    return seconds


def retry_instant(retry_at: object) -> float | None:
    """``retry_at`` of a `WorkQueue.fail` call, checked before any I/O: None or a finite
    instant. Raises `InvalidInputError`."""
    if retry_at is None:
        return None
    if isinstance(retry_at, bool) or not isinstance(retry_at, int | float):
        raise InvalidInputError(f"retry_at must be a number of seconds, got {retry_at!r}")
    return finite(float(retry_at), "retry_at")


def failure_text(error: object, retryable: object) -> str:
    """A `WorkQueue.fail` call's ``error`` as every backing keeps it (`mend_text`: secrets
    masked, bounded, storable), once ``retryable`` is checked to be a bool: "no" would
    read as true. Raises `InvalidInputError` before any I/O."""
    if type(retryable) is not bool:
        raise InvalidInputError(f"retryable must be a bool, got {type(retryable).__name__}")
    return mend_text(error, "error")


def payload_text(payload: Mapping[str, str]) -> str:
    """``payload`` as every backing stores it: compact JSON, keys in the payload's order,
    non-ASCII kept as it is. Raises `InvalidInputError` before any I/O for a payload no
    backing could keep alike: a key or value that is not a string, holds a NUL character
    (PostgreSQL's ``jsonb`` refuses it) or a lone surrogate (not encodable as UTF-8).

    Written out rather than through ``json.dumps``, which builds an encoder per call
    (0.4 µs against 1.3-1.7 µs for a one-pair payload): this runs on every enqueue."""
    if not payload:
        return "{}"
    quoted = encode_basestring
    try:
        text = (
            "{"
            + ",".join([quoted(key) + ":" + quoted(value) for key, value in payload.items()])
            + "}"
        )
    except TypeError:
        raise InvalidInputError("payload must map strings to strings") from None
    return storable_json(text, "payload")


DEAD_LETTERS_MOST = 10_000
"""The most dead letters one `WorkQueue.dead_letters` call may ask for."""


def dead_letter_limit(limit: int) -> int:
    """``limit`` of a `dead_letters` call, checked before any I/O: an int from 1 to
    `DEAD_LETTERS_MOST`. Raises `InvalidInputError`."""
    positive_int(limit, "limit")
    if limit > DEAD_LETTERS_MOST:
        raise InvalidInputError(f"limit must be at most {DEAD_LETTERS_MOST:,}, got {limit}")
    return limit


DEAD_LETTER_CURSOR_MOST = 2048
"""The longest cursor `WorkQueue.dead_letter_page` takes (characters)."""


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    """One page of a dead-letter listing and the cursor of the next."""

    items: list[WorkItem]
    after: str | None
    """What to pass as ``after`` for the next page; None when no dead letter follows."""


def dead_letter_cursor(after: str | None) -> str | None:
    """``after`` of a `dead_letter_page` call, checked before any I/O: None or a non-empty
    string of at most `DEAD_LETTER_CURSOR_MOST` characters. Raises `InvalidInputError`."""
    if after is None:
        return None
    if not isinstance(after, str) or not after or len(after) > DEAD_LETTER_CURSOR_MOST:
        raise InvalidInputError(
            "after must be None or the cursor a previous page returned (a non-empty string "
            f"of at most {DEAD_LETTER_CURSOR_MOST} characters)"
        )
    return after


def dead_letter_query(
    tenant: str | None, queue: str | None, limit: int, after: str | None
) -> str | None:
    """The arguments of a `dead_letter_page` call, checked before any I/O (names that are
    identifiers, `dead_letter_limit`, `dead_letter_cursor`): the cursor. Raises
    `InvalidInputError`."""
    if tenant is not None:
        identifier(tenant, "tenant")
    if queue is not None:
        identifier(queue, "queue")
    dead_letter_limit(limit)
    return dead_letter_cursor(after)


def sequence_cursor(after: str | None) -> int | None:
    """The place in a store's order of items (an integer, as the SQL and memory backings
    keep it) a cursor (`dead_letter_cursor`) names, checked before any I/O. Raises
    `InvalidInputError`."""
    if after is None:
        return None
    if not after.isascii() or not after.isdigit() or len(after) > 19:
        raise InvalidInputError("after is not a cursor this store made")
    return int(after)


DEAD_PURGE_BATCH = 1000
"""Dead letters one statement or script of `WorkQueue.purge_dead_letters` deletes at
most: a purge of many goes in batches of this size, so no single write grows with them."""


def dead_letter_target(queue: str, tenant: str | None, item_id: str | None) -> None:
    """The arguments of a `purge_dead_letters` call, checked before any I/O: names that
    are identifiers, and a tenant named with an item. Raises `InvalidInputError`."""
    identifier(queue, "queue")
    if tenant is not None:
        identifier(tenant, "tenant")
    if item_id is not None:
        identifier(item_id, "item_id")
        if tenant is None:
            raise InvalidInputError("item_id: name its tenant too (an id is unique per tenant)")


async def in_batches(delete: Callable[[], Awaitable[int]]) -> int:
    """Call ``delete`` (one statement or transaction deleting up to `DEAD_PURGE_BATCH`)
    until a call deletes fewer; the total deleted."""
    deleted = 0
    while True:
        batch = await delete()
        deleted += batch
        if batch < DEAD_PURGE_BATCH:
            return deleted


QUEUE_NAMES_MOST = 1000
"""The most queue names one `WorkQueue.queue_names` call answers."""


def names_limit(limit: int) -> int:
    """``limit`` of a `queue_names` call, checked before any I/O: 1 to `QUEUE_NAMES_MOST`.
    Raises `InvalidInputError`."""
    positive_int(limit, "limit")
    if limit > QUEUE_NAMES_MOST:
        raise InvalidInputError(f"limit must be at most {QUEUE_NAMES_MOST:,}, got {limit}")
    return limit


BATCH_MOST = 1000
"""The most items one batched call (`claim_many`) takes, whatever its ``limit`` asks."""


def batch_limit(limit: int) -> int:
    """``limit`` of a `claim_many` call, checked before any I/O and capped at `BATCH_MOST`.
    Raises `InvalidInputError` for anything but a positive int."""
    return min(positive_int(limit, "limit"), BATCH_MOST)


def batch_items(items: Sequence[WorkItem]) -> tuple[list[WorkItem], list[str]]:
    """The items of an `enqueue_many` call, each checked (`checked_item`) before any I/O,
    and their payloads as every backing stores them (`payload_text`): at most `BATCH_MOST`
    items. Raises `InvalidInputError`."""
    if isinstance(items, WorkItem | str | bytes) or not isinstance(items, Sequence):
        raise InvalidInputError("items must be a sequence of WorkItem")
    if len(items) > BATCH_MOST:
        raise InvalidInputError(f"items must hold at most {BATCH_MOST:,} items, got {len(items)}")
    payloads: list[str] = []
    for item in items:
        # The exact type first: a pydantic model's isinstance goes through its ABC machinery.
        if type(item) is not WorkItem and not isinstance(item, WorkItem):
            raise InvalidInputError(f"items must hold WorkItem values, got {type(item).__name__}")
        checked_item(item)
        payloads.append(payload_text(item.payload))
    return list(items), payloads


def settle_keys(items: Sequence[tuple[str, str]], worker: str) -> list[tuple[str, str]]:
    """The ``(item_id, tenant)`` pairs of a `complete_many` call, each id (and ``worker``)
    checked before any I/O, as every backing does. Raises `InvalidInputError`."""
    identifier(worker, "worker")
    keys: list[tuple[str, str]] = []
    for item_id, tenant in items:
        keys.append((identifier(item_id, "item_id"), identifier(tenant, "tenant")))
    return keys


def stored_item(fields: dict[str, object]) -> WorkItem:
    """A `WorkItem` of ``fields`` (a fresh dict holding every field) without validation:
    for items a backing reads back, whose values were validated on the way in or computed
    by the store (the claim and settle hot path)."""
    return _built(fields, set(_ALL_FIELDS))


# What an enqueue resets; attempts and failures are the item's own.
_QUEUED_RESET: dict[str, object] = {
    "state": WorkState.QUEUED,
    "worker": None,
    "lease_expires_at": None,
    "claimed_at": None,
    "first_claimed_at": None,
}
_QUEUED_SET = frozenset((*_QUEUED_RESET, "enqueued_at", "available_at"))


def queued_copy(item: WorkItem, now: float) -> WorkItem:
    """``item`` as an enqueue at ``now`` stores it: queued, held by nobody, due at its
    ``available_at`` or now. What ``model_copy(update=...)`` builds, without building the
    update per call (every backing's enqueue returns one)."""
    fields = {**item.__dict__, **_QUEUED_RESET, "enqueued_at": now}
    if fields["available_at"] is None:
        fields["available_at"] = now
    return _built(fields, item.__pydantic_fields_set__ | _QUEUED_SET)


def requeued(item: WorkItem) -> WorkItem:
    """A dead letter as a new queued item: attempts reset, lease fields cleared, failures
    kept (what ``durably queue requeue`` and the dashboard enqueue)."""
    return item.model_copy(
        update={
            "state": WorkState.QUEUED,
            "attempts": 0,
            "worker": None,
            "enqueued_at": None,
            "available_at": None,
            "lease_expires_at": None,
            "first_claimed_at": None,
            "claimed_at": None,
        }
    )


@dataclass(frozen=True, slots=True)
class Settlement:
    """What a failure does to an item: requeue it at ``available_at`` or dead-letter it."""

    attempts: int
    dead: bool
    available_at: float | None


ITEM_RETRY_FIELD = "retry"
"""The payload field an item may carry its own retry policy in (a task's `Retry` does):
JSON ``[max_attempts, initial, maximum, multiplier]``. A lapsed lease or a hold given back
at a worker's restart is settled by it (`QueuePolicy.for_item`), not by the queue's
attempts and backoff: the handler's own failures say when to retry anyway."""

_CARRIED_KEPT = 256
_carried: dict[tuple[str, QueuePolicy], QueuePolicy] = {}


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """Leases, retries, backoff and the dead letter: decided here, applied by every backing."""

    lease_seconds: float = 30.0
    max_attempts: int = 5
    backoff_seconds: float = 1.0
    backoff_cap_seconds: float = 300.0
    max_lease_seconds: float = 3600.0
    backoff_multiplier: float = 2.0

    def __post_init__(self) -> None:
        positive(self.lease_seconds, "lease_seconds")
        positive(self.backoff_seconds, "backoff_seconds")
        positive(self.backoff_cap_seconds, "backoff_cap_seconds")
        positive(self.max_lease_seconds, "max_lease_seconds")
        if isinstance(self.max_attempts, bool) or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts!r}")
        if not finite(self.backoff_multiplier, "backoff_multiplier") >= 1.0:
            raise ValueError(f"backoff_multiplier must be 1 or more, got {self.backoff_multiplier}")

    def backoff_for(self, attempts: int) -> float:
        """Delay before retry number ``attempts``: ``min(base * multiplier**(n-1), cap)``,
        0 for n <= 0."""
        if attempts <= 0:
            return 0.0
        # Cap the exponent so a huge attempt count cannot overflow a float.
        exponent = min(attempts - 1, 1024)
        try:
            delay = self.backoff_seconds * self.backoff_multiplier**exponent
        except OverflowError:
            delay = self.backoff_cap_seconds
        return min(delay, self.backoff_cap_seconds)

    def for_item(self, payload: Mapping[str, str]) -> QueuePolicy:
        """The policy a lapsed lease (or an adopted hold) of an item with ``payload`` is
        settled by: the attempts and waits of the retry policy it carries
        (`ITEM_RETRY_FIELD`), this one's lease and caps otherwise; this policy when it
        carries none, or none that reads."""
        text = payload.get(ITEM_RETRY_FIELD)
        if text is None:
            return self
        known = _carried.get((text, self))
        if known is None:
            if len(_carried) >= _CARRIED_KEPT:
                _carried.clear()
            known = _carried[(text, self)] = self._carrying(text)
        return known

    def _carrying(self, text: str) -> QueuePolicy:
        try:
            attempts, initial, maximum, multiplier = json.loads(text)
            # A wait of 0 (a task's `Retry(initial=0)`) is kept a microsecond: a policy's
            # backoff is positive.
            return QueuePolicy(
                lease_seconds=self.lease_seconds,
                max_attempts=attempts,
                backoff_seconds=max(float(initial), 1e-6),
                backoff_cap_seconds=max(float(maximum), 1e-6),
                max_lease_seconds=self.max_lease_seconds,
                backoff_multiplier=float(multiplier),
            )
        except (ValueError, TypeError, InvalidInputError):
            return self

    def settle_failure(
        self,
        attempts_before: int,
        *,
        retryable: bool,
        now: float,
        immediate: bool = False,
        retry_at: float | None = None,
    ) -> Settlement:
        """The outcome of one more failed attempt.

        Dead-letters when not ``retryable`` or the attempts reach ``max_attempts``; otherwise
        requeues at ``now + backoff_for(attempts)`` (at ``now`` when ``immediate``). A
        ``retry_at`` (the caller's own retry policy decided to retry) requeues a retryable
        failure at that instant whatever ``max_attempts`` says.
        """
        attempts = attempts_before + 1
        if retryable and retry_at is not None:
            return Settlement(attempts=attempts, dead=False, available_at=retry_at)
        if not retryable or attempts >= self.max_attempts:
            return Settlement(attempts=attempts, dead=True, available_at=None)
        delay = 0.0 if immediate else self.backoff_for(attempts)
        return Settlement(attempts=attempts, dead=False, available_at=now + delay)

    def lease_for(self, lease_seconds: float | None) -> float:
        """The lease a claim gets: the policy's unless overridden, never above the cap."""
        if lease_seconds is None:
            return min(self.lease_seconds, self.max_lease_seconds)
        return min(positive(lease_seconds, "lease_seconds"), self.max_lease_seconds)


class QueueStats(BaseModel):
    """A snapshot of one queue."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    depth: int
    claimed: int
    dead_lettered: int
    oldest_age_seconds: float
    reaped: int
    duplicates_suppressed: int


@runtime_checkable
class WorkQueue(Protocol):
    """Hands out work items under leases, fairly across tenants.

    Delivery is at-least-once: a handler may see an item again after a lapsed lease, so
    handlers must be idempotent.
    """

    @property
    def policy(self) -> QueuePolicy:
        """The retry and lease policy this queue applies."""
        ...

    async def close(self) -> None:
        """Release what the store holds of its own, such as a listening connection; a
        pool, client or database passed in stays open for its owner. Idempotent."""
        ...

    async def enqueue(self, item: WorkItem, *, dedupe_ttl: float | None = None) -> WorkItem:
        """Queue ``item``; a live item with the same id or dedupe key is returned instead.

        With ``dedupe_ttl`` (seconds), the item's dedupe key outlasts it: for that long
        after it completes or is dead-lettered, an enqueue of the same key (tenant and
        queue) is answered with the finished item and queues nothing. Without, a finished
        item frees its key at once."""
        ...

    async def enqueue_many(
        self, items: Sequence[WorkItem], *, dedupe_ttl: float | None = None
    ) -> list[WorkItem]:
        """`enqueue` of each of ``items`` in one round trip (one statement, script or
        transaction), atomically where the backing has transactions: per item, in order,
        what `enqueue` would have answered. At most `BATCH_MOST` items a call; every item
        is checked before any I/O."""
        ...

    async def claim(
        self, *, worker: str, queue: str = DEFAULT_QUEUE, lease_seconds: float | None = None
    ) -> WorkItem | None:
        """Atomically take one due item (tenants in rotation, then priority, then age)."""
        ...

    async def heartbeat(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Extend the caller's lease; `LeaseLostError` if it is not the holder any more."""
        ...

    async def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Finish the item; fenced like `heartbeat`."""
        ...

    async def fail(
        self,
        item_id: str,
        *,
        tenant: str,
        worker: str,
        error: str,
        retryable: bool = True,
        retry_at: float | None = None,
    ) -> WorkItem:
        """Record a failed attempt: requeue with backoff or dead-letter, per the policy; a
        retryable failure with ``retry_at`` is requeued at that instant (the caller's own
        retry policy decided, as a task's does)."""
        ...

    async def reap(self) -> list[WorkItem]:
        """Return every lapsed item to the queue (attempt counted); the items moved, as
        they now stand (queued again or dead-lettered)."""
        ...

    async def adopt(self, *, worker: str) -> list[WorkItem]:
        """Give back at once everything ``worker`` holds (after a restart); the items
        moved, as they now stand."""
        ...

    async def dead_letters(
        self, *, tenant: str | None = None, limit: int = 50, queue: str | None = None
    ) -> list[WorkItem]:
        """Dead-lettered items of ``tenant`` (of every tenant when None), optionally of one
        queue, oldest enqueued first."""
        ...

    async def dead_letter_page(
        self,
        *,
        tenant: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> DeadLetterPage:
        """One page of the listing `dead_letters` gives (same filters, same order), from
        the cursor ``after`` a previous page returned (None: from the first). Pages see
        the store as it is when each is read: an item dead-lettered, requeued or purged
        between two pages may be missed or listed in its new place. A cursor is opaque,
        of the backing that made it; one it did not make raises `InvalidInputError`
        before any I/O."""
        ...

    async def stats(self, *, queue: str = DEFAULT_QUEUE) -> QueueStats:
        """Depth, claimed, dead-lettered, oldest age and counters of ``queue``."""
        ...

    async def purge(self, *, queue: str, tenant: str | None = None) -> int:
        """Delete every queued item of ``queue`` (of one ``tenant``, or of every tenant):
        claimed items run on and dead letters stay. Their dedupe keys are freed. Returns
        how many items were deleted."""
        ...

    async def purge_dead_letters(
        self, *, queue: str, tenant: str | None = None, item_id: str | None = None
    ) -> int:
        """Delete dead letters of ``queue``: the one ``item_id`` of ``tenant``, every one of
        ``tenant``, or every tenant's; a dedupe key one of them keeps is freed. Queued and
        claimed items stay. Returns how many were deleted."""
        ...

    async def finished_per_minute(self, *, queues: Sequence[str]) -> dict[str, list[Minute]]:
        """How many items of each of ``queues`` (at most `NAMES_MOST`) completed and were
        dead-lettered in each of the last `MINUTES` minutes of the store's clock, oldest
        first; queues and minutes with none are left out. Reads the ring of counts the
        finishing writes keep (`durably.stores.throughput`), never the items."""
        ...

    async def queue_names(self, *, limit: int = QUEUE_NAMES_MOST) -> list[str]:
        """The names of the queues that hold items or counters, sorted, at most
        ``limit`` (up to `QUEUE_NAMES_MOST`)."""
        ...


__all__ = [
    "DEAD_LETTERS_MOST",
    "DEAD_LETTER_CURSOR_MOST",
    "DEAD_PURGE_BATCH",
    "DEDUPE_SWEEP_BATCH",
    "DEDUPE_TTL_MOST",
    "DEFAULT_QUEUE",
    "ITEM_RETRY_FIELD",
    "QUEUE_NAMES_MOST",
    "DeadLetterPage",
    "FlowFields",
    "QueuePolicy",
    "QueueStats",
    "Settlement",
    "WorkItem",
    "WorkPriority",
    "WorkQueue",
    "WorkState",
    "batch_items",
    "checked_item",
    "dead_letter_limit",
    "dead_letter_target",
    "dedupe_window",
    "flow_fields",
    "in_batches",
    "names_limit",
    "queued_copy",
    "requeued",
    "retry_instant",
    "stored_item",
    "tick_mark",
]
