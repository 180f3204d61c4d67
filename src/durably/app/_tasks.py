"""`Task`: a function run as background work on a queue, registered with ``@app.task``.

A task's item carries everything a worker needs besides the function: the task's name,
its arguments (encoded from the annotations, as a workflow's are) and its retry policy,
so a producer and a worker cannot disagree on how the item is retried.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import math
import random
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from pydantic import SecretStr

from durably.app._context import is_async
from durably.app._formats import compact
from durably.app._retry import Retry
from durably.app._task_flow import TaskFlow
from durably.app._values import Duration, Signature, seconds_of
from durably.engine.schedules import Schedule, tick_of
from durably.errors import (
    ConfigurationError,
    DurablyError,
    InvalidInputError,
    NonRetryable,
    StepTimeoutError,
)
from durably.stores.backoff import full_jitter_seconds
from durably.stores.work import (
    BATCH_MOST,
    DEFAULT_QUEUE,
    ITEM_RETRY_FIELD,
    WorkItem,
    WorkPriority,
    WorkState,
    stored_item,
)
from durably.validation import identifier

if TYPE_CHECKING:
    from durably.app._core import Core

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_RETRY = Retry(max_attempts=3, initial=1.0, maximum=60.0)
"""A task's retries when it names none: three attempts, waits from 1 s up to 60 s."""
DEFAULT_DEDUPE_TTL = 86_400.0
"""How long a task's dedupe key is meant to outlast its item, in seconds: 24 hours."""
RESERVED = frozenset({"delay", "priority", "tenant", "dedupe_key"})
"""Parameter names a task cannot take: `Task.enqueue` takes them as its own options."""

# The payload's keys: the task's name, its encoded arguments, the retry policy it travels
# with. A payload holds text only (every backing stores it alike).
TASK_KEY = "task"
ARGS_KEY = "args"
RETRY_KEY = ITEM_RETRY_FIELD


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """What ``@app.task`` was given besides the function.

    ``more`` keeps the flow-control and schedule options (``concurrency=``,
    ``concurrency_key=``, ``throttle=``, ``cron=``, ``tz=``) as given; the task's
    `TaskFlow` reads them.
    """

    queue: str = DEFAULT_QUEUE
    retry: Retry = DEFAULT_RETRY
    timeout: float | None = None
    dedupe_ttl: float = DEFAULT_DEDUPE_TTL
    more: Mapping[str, object] = field(default_factory=dict)


class Task(Generic[P, R]):
    """A registered task: what `App.task` makes of a function.

    Called directly it simply runs the function; `enqueue` queues it as a work item that a
    worker (`App.serve`, ``durably worker``) runs, retried by the task's `Retry`.
    """

    def __init__(
        self,
        core: Core,
        fn: Callable[P, Awaitable[R]] | Callable[P, R],
        *,
        name: str,
        options: TaskOptions,
    ) -> None:
        self._core = core
        self.fn = fn
        self.name = identifier(name, "name")
        self.options = options
        self.signature = Signature(fn, f"task {name!r}")
        taken = RESERVED.intersection(self.signature.names)
        if taken:
            raise ConfigurationError(
                f"task {name!r}: parameter {sorted(taken)[0]!r} is reserved (enqueue takes it "
                "as an option); rename it"
            )
        self.flow = TaskFlow.of(self.name, options.more, self.signature)
        self._async = is_async(fn)
        self._retry_text = _retry_text(options.retry)
        functools.update_wrapper(self, fn)

    @property
    def queue(self) -> str:
        """The work queue this task's items go to."""
        return self.options.queue

    @property
    def retry(self) -> Retry:
        """How a failed run is retried (carried by every item this task queues)."""
        return self.options.retry

    @property
    def timeout(self) -> float | None:
        """The bound on one run, in seconds (None: none)."""
        return self.options.timeout

    @property
    def dedupe_ttl(self) -> float:
        """How long a dedupe key lasts after its item finished, in seconds."""
        return self.options.dedupe_ttl

    def schedule(self) -> Schedule | None:
        """The cron schedule of a task registered with ``cron=`` (None: not a cron task).

        Each tick enqueues one run, its time given to the task's datetime parameter.
        """
        payload = {TASK_KEY: self.name, ARGS_KEY: "{}", RETRY_KEY: self._retry_text}
        return self.flow.schedule(self.queue, self._core.tenant, payload)

    def on_cron(self, cron: str, tz: str) -> Schedule:
        """The schedule queueing a run of this task at every tick of ``cron`` in ``tz``.

        `App.schedule` registers it.

        Args:
            cron: A five-field cron expression.
            tz: The IANA time zone of its ticks.

        Raises:
            InvalidInputError: A ``cron`` that does not parse, an unknown ``tz``, a
                ``concurrency_key`` (a cron task's ticks share one key).
            ConfigurationError: A task whose parameters a tick cannot fill.
        """
        more = {**self.options.more, "cron": cron, "tz": tz}
        self.flow = TaskFlow.of(self.name, more, self.signature)
        self.options = dataclasses.replace(self.options, more=more)
        schedule = self.schedule()
        if schedule is None:  # pragma: no cover - a cron was given
            raise ConfigurationError(f"task {self.name!r}: no cron given")
        return schedule

    def retarget(self, dsn: SecretStr) -> None:
        """Point the task's App at another store before it opens.

        ``durably tasks enqueue --dsn`` does; `ConfigurationError` once the stores are open.
        """
        self._core.retarget(dsn)

    async def close(self) -> None:
        """Close the stores of the task's App (idempotent; they open again if used)."""
        await self._core.close()

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R] | R:
        return self.fn(*args, **kwargs)

    async def enqueue(
        self,
        *args: Any,
        delay: Duration | None = None,
        priority: WorkPriority | None = None,
        tenant: str | None = None,
        dedupe_key: str | None = None,
        **kwargs: Any,
    ) -> WorkItem:
        """Queue one run of the task with these arguments.

        The options are keyword arguments beside the task's own: ``delay=`` (seconds or a
        timedelta before it may run; default at once), ``priority=`` (a `WorkPriority`
        within the tenant; default NORMAL), ``tenant=`` (default the App's) and
        ``dedupe_key=`` (an item of the same key, tenant and queue, live or finished
        within the task's ``dedupe_ttl``, is answered instead, and nothing is queued).

        Returns:
            The queued `WorkItem`, or the item holding ``dedupe_key`` (live, or finished
            less than ``dedupe_ttl`` ago).

        Raises:
            InvalidInputError: Before any I/O: arguments that do not fit the task's
                signature or annotations, a negative or non-finite ``delay``, an empty or
                unusable ``dedupe_key`` or ``tenant``, a ``priority`` that is not a
                `WorkPriority`.
        """
        item = self._item(
            args, kwargs, delay=delay, priority=priority, tenant=tenant, dedupe_key=dedupe_key
        )
        queue = (await self._core.stores()).queue
        self._core.note_task_due(item.available_at)
        return await queue.enqueue(item, dedupe_ttl=self.dedupe_ttl)

    async def enqueue_many(
        self,
        calls: Iterable[Sequence[Any] | Mapping[str, Any]],
        *,
        delay: Duration | None = None,
        priority: WorkPriority | None = None,
        tenant: str | None = None,
        dedupe_keys: Sequence[str | None] | None = None,
    ) -> list[WorkItem]:
        """Queue many runs of the task in one round trip to the store.

        Args:
            calls: Each run's arguments: a tuple of positional arguments or a mapping of
                keyword arguments. At most 1,000.
            delay: Seconds or a timedelta before each may run (default: at once).
            priority: Each item's priority within its tenant (default NORMAL).
            tenant: The items' tenant (default: the App's).
            dedupe_keys: A dedupe key per call (None for none), as `enqueue`'s.

        Returns:
            Per call, in order, what `enqueue` would have answered.

        Raises:
            InvalidInputError: Before any I/O, for any call, as `enqueue`; more than 1,000
                calls; ``dedupe_keys`` of another length than ``calls``.
        """
        listed = list(calls)
        if len(listed) > BATCH_MOST:
            raise InvalidInputError(f"calls must hold at most {BATCH_MOST:,}, got {len(listed)}")
        keys: Sequence[str | None] = [None] * len(listed) if dedupe_keys is None else dedupe_keys
        if isinstance(keys, str) or len(keys) != len(listed):
            raise InvalidInputError("dedupe_keys must hold one key (or None) per call")
        common = self._common(delay, priority, tenant)
        ids = secrets.token_hex(16 * len(listed))  # one draw for every item's id
        items = []
        for n, (call, key) in enumerate(zip(listed, keys, strict=True)):
            if type(call) is tuple:  # the usual call, without the ABC checks below
                positional, keywords = call, {}
            elif isinstance(call, Mapping):
                positional, keywords = (), dict(call)
            elif isinstance(call, Sequence) and not isinstance(call, str | bytes):
                positional, keywords = tuple(call), {}
            else:
                raise InvalidInputError(
                    f"calls[{n}] must be a tuple of arguments or a mapping of keyword "
                    f"arguments, got {type(call).__name__}"
                )
            items.append(self._made(common, positional, keywords, key, ids[32 * n : 32 * n + 32]))
        if not items:
            return []
        queue = (await self._core.stores()).queue
        self._core.note_task_due(items[0].available_at)
        return await queue.enqueue_many(items, dedupe_ttl=self.dedupe_ttl)

    def _item(
        self,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        delay: Duration | None = None,
        priority: WorkPriority | None = None,
        tenant: str | None = None,
        dedupe_key: str | None = None,
    ) -> WorkItem:
        """The work item of one call, every argument checked (no I/O)."""
        common = self._common(delay, priority, tenant)
        return self._made(common, args, kwargs, dedupe_key, secrets.token_hex(16))

    def _common(
        self, delay: Duration | None, priority: WorkPriority | None, tenant: str | None
    ) -> dict[str, object]:
        """The fields every item of one enqueue call shares, each checked (no I/O)."""
        seconds = 0.0 if delay is None else _delay(delay)
        if priority is not None and not isinstance(priority, WorkPriority):
            raise InvalidInputError(f"priority must be a durably.WorkPriority, got {priority!r}")
        return {
            "tenant": self._core.tenant if tenant is None else identifier(tenant, "tenant"),
            "queue": self.queue,
            "priority": WorkPriority.NORMAL if priority is None else priority,
            "attempts": 0,
            "state": WorkState.QUEUED,
            "worker": None,
            "enqueued_at": None,
            "available_at": self._core.clock.now() + seconds if seconds else None,
            "lease_expires_at": None,
            "first_claimed_at": None,
            "claimed_at": None,
            "failures": (),
            "concurrency_key": None,
            "concurrency_limit": None,
            "throttle_key": None,
            "throttle_seconds": None,
            "throttle_burst": None,
        }

    def _made(
        self,
        common: dict[str, object],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        dedupe_key: str | None,
        item_id: str,
    ) -> WorkItem:
        """One call's item, its arguments and ``dedupe_key`` checked (no I/O)."""
        encoded = self.signature.encode_args(args, kwargs)
        if dedupe_key is not None:
            identifier(dedupe_key, "dedupe_key")
        payload = {
            TASK_KEY: self.name,
            ARGS_KEY: compact(encoded),
            RETRY_KEY: self._retry_text,
        }
        # Every field is checked above or made here (the queue checks the ids again before
        # any I/O): built without pydantic's validation, on every enqueue's path.
        return stored_item(
            {
                **common,
                "id": item_id,
                "payload": payload,
                "dedupe_key": dedupe_key,
                **self.flow.fields(args, kwargs),
            }
        )

    async def run(self, item: WorkItem) -> None:
        """Run the task for ``item`` once: the worker's handler.

        Raises `TaskFailed` for a failure, saying whether and when to retry by the retry
        policy the item carries; the queue then requeues or dead-letters the item.
        """
        retry = _retry_of(item.payload.get(RETRY_KEY), self.retry)
        if item.attempts >= retry.max_attempts:
            # Attempts a lapsed lease counted (a worker died running it) used them all.
            raise TaskFailed(
                NonRetryable(f"task {self.name!r}: {item.attempts} attempts already made"),
                retry_at=None,
            )
        try:
            tick = tick_of(item) if self.flow.tick_parameter is not None else None
            keywords: dict[str, Any]
            if tick is not None:  # a cron tick's item: the tick is the one argument
                positional, keywords = [tick], {}
            else:
                positional, keywords = self.signature.decode_args(
                    json.loads(item.payload.get(ARGS_KEY, "{}"))
                )
        except Exception as exc:  # no later attempt reads them any better
            raise TaskFailed(
                NonRetryable(f"task {self.name!r}: its arguments no longer fit: {exc}"),
                retry_at=None,
            ) from None
        try:
            await self._call(positional, keywords)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            attempt = item.attempts + 1
            if attempt >= retry.max_attempts or isinstance(
                exc, (NonRetryable, *self.retry.non_retryable)
            ):
                raise TaskFailed(exc, retry_at=None) from exc
            wait = full_jitter_seconds(
                retry.initial,
                attempt,
                random.random,
                cap_seconds=retry.maximum,
                multiplier=retry.multiplier,
            )
            raise TaskFailed(exc, retry_at=self._core.clock.now() + wait) from exc

    async def _call(self, positional: list[Any], keywords: dict[str, Any]) -> None:
        fn: Any = self.fn
        call: Callable[[], Awaitable[Any]]
        if self._async:
            call = functools.partial(fn, *positional, **keywords)
        else:
            call = functools.partial(asyncio.to_thread, fn, *positional, **keywords)
        if self.timeout is None:
            await call()
            return
        try:
            async with asyncio.timeout(self.timeout):
                await call()
        except TimeoutError:
            raise StepTimeoutError(
                f"task {self.name!r} ran longer than its timeout ({self.timeout:g}s)"
            ) from None


class TaskFailed(DurablyError):
    """A task's run failed: ``retry_at`` is when to try again (None: dead-letter now).

    The worker records the original error's repr; only the settle reads this wrapper.
    """

    def __init__(self, error: BaseException, *, retry_at: float | None) -> None:
        super().__init__(str(error), retryable=retry_at is not None)
        self.error = error
        self.retry_at = retry_at

    def __repr__(self) -> str:
        return repr(self.error)


def _delay(delay: object) -> float:
    """``delay=`` as seconds: zero or more, finite; `InvalidInputError` naming it."""
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise InvalidInputError(f"delay must be seconds or a timedelta, got {delay!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidInputError(f"delay must be zero or more (finite), got {delay!r}")
    return seconds_of(seconds, "delay", zero=True)


def _retry_text(retry: Retry) -> str:
    """The part of ``retry`` an item carries, as compact JSON."""
    return json.dumps(
        [retry.max_attempts, retry.initial, retry.maximum, retry.multiplier],
        separators=(",", ":"),
    )


_RETRIES_KEPT = 256
_retries: dict[tuple[str, Retry], Retry] = {}


def _retry_of(text: str | None, fallback: Retry) -> Retry:
    """Return the retry policy an item carries, or ``fallback`` if it carries none readable.

    The attempts and waits come from the item; the non-retryable types are the worker's.
    Read once per text and task (every item of a task carries the same).
    """
    if text is None:
        return fallback
    known = _retries.get((text, fallback))
    if known is not None:
        return known
    if len(_retries) >= _RETRIES_KEPT:
        _retries.clear()
    made = _read_retry(text, fallback)
    _retries[(text, fallback)] = made
    return made


def _read_retry(text: str, fallback: Retry) -> Retry:
    try:
        attempts, initial, maximum, multiplier = json.loads(text)
        return Retry(
            max_attempts=attempts,
            initial=initial,
            maximum=maximum,
            multiplier=multiplier,
            jitter=1.0,
            non_retryable=fallback.non_retryable,
        )
    except (ValueError, TypeError, DurablyError):
        return fallback


__all__ = [
    "DEFAULT_DEDUPE_TTL",
    "DEFAULT_RETRY",
    "RESERVED",
    "Task",
    "TaskFailed",
    "TaskOptions",
]
