"""`Context`: what a workflow body is given as its first parameter.

Every call it offers is recorded under a key made of a name and its occurrence in the body,
so each pass (a body is re-run from the top) sees exactly what the first one saw.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, Protocol, TypeVar, overload

from durably.app import _layout as layout
from durably.app import _tenancy as tenancy
from durably.app._begins import AT_ONCE, Begins
from durably.app._branches import gather
from durably.app._drift import Placement
from durably.app._limits import Limits, check_start
from durably.app._options import WorkflowOptions, child_options
from durably.app._runs import usage_delta
from durably.app._topics import Topic
from durably.app._values import ANY, Duration, Value, seconds_of, stored_text
from durably.app._watch import StepWatch, watched
from durably.engine.runtime import Execution
from durably.errors import (
    ChildWorkflowFailedError,
    ContinueAsNew,
    IncompatibleRecordError,
    InputNeeded,
    InvalidInputError,
    MessageNeeded,
    NondeterminismError,
    RecordLimitError,
    WorkflowConflictError,
    WorkflowLimitError,
    WorkflowStopped,
)
from durably.stores.runs import StateDelta
from durably.stores.work import WorkPriority
from durably.stores.workflows import DEFAULT_PRIORITY, is_inbox_key
from durably.validation import identifier

if TYPE_CHECKING:
    from durably.app._handles import WorkflowHandle
    from durably.app._workflow import Workflow

T = TypeVar("T")
P = ParamSpec("P")

DERIVED_TRIES = 4
"""How many ids in line a body's derived child id tries when workflows that are not its
children hold them (``…#1``, ``…#1~2``, ...), before `WorkflowConflictError`."""
DURABLE_BACKOFF = 5.0
"""A step's backoff longer than this many seconds is a durable sleep, not an in-pass wait."""

Attempt = tuple["Context", str, int]
"""A running step attempt: its workflow's context, the step's key and the attempt number
(from 1); `context()` builds the `StepContext` from it only when asked."""

# What this task runs in: a workflow body (its Context), a step attempt inside one (the body
# is then not current: further step calls run plainly), or neither. One variable, so a
# step's attempt binds and unbinds once.
_current: contextvars.ContextVar[Context | Attempt | None] = contextvars.ContextVar(
    "durably_current", default=None
)


@dataclass(frozen=True, slots=True)
class StepContext:
    """What `durably.context()` gives inside a running step.

    Enough to build an idempotency key for a call to an outside API:
    ``f"{tenant}/{workflow}/{step}"`` is the same on every attempt of the step call (a
    workflow id is unique only within its tenant), and differs between the runs
    `Context.continue_as_new` begins (``step`` names the run after the first).

    Attributes:
        workflow: The workflow's id.
        step: The step call's key: its name and occurrence (``name#1``), or its explicit
            key (`Step.keyed`).
        attempt: The attempt number, from 1.
        tenant: The workflow's tenant.
        kind: The workflow's kind.
        run_number: The workflow's run: 1, plus one per `Context.continue_as_new`; after
            the first, ``step`` ends with it (``name#1@run2``).
    """

    workflow: str
    step: str
    attempt: int
    tenant: str
    kind: str
    run_number: int = 1


def context() -> StepContext:
    """Return the running step's `StepContext`.

    Raises:
        RuntimeError: Called outside a step attempt of a workflow (a step called outside a
            workflow body runs plainly, without one).
    """
    current = _current.get()
    if not isinstance(current, tuple):
        raise RuntimeError("durably.context() is only available inside a running step")
    ctx, key, attempt = current
    run = ctx.run_number
    step = key if run == 1 else f"{key}@run{run}"
    return StepContext(ctx.id, step, attempt, ctx.tenant, ctx.kind, run)


def current_workflow() -> Context | None:
    """The workflow body this code runs in (outside a step), or None."""
    current = _current.get()
    return current if isinstance(current, Context) else None


def current_tenant(default: str) -> str:
    """The tenant of the workflow this code runs in (its body or a step), else ``default``.

    What a start or a lookup without ``tenant=`` means there.
    """
    current = _current.get()
    if current is None:
        return default
    return current.tenant if isinstance(current, Context) else current[0].tenant


class _ReplayQuiet(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Drops records while the body replays what earlier passes already did (and logged)."""

    def __init__(self, logger: logging.Logger, ctx: Context) -> None:
        super().__init__(logger, {"workflow": ctx.id, "kind": ctx.kind, "tenant": ctx.tenant})
        self._ctx = ctx

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if not self._ctx.replaying:
            super().log(level, msg, *args, **kwargs)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        kwargs.setdefault("extra", {}).update(self.extra or {})
        return msg, kwargs


class CancelWatch(Protocol):
    """Tells a pass of a cancel that arrived after it began (checked before fresh steps)."""

    def due(self, workflow: str) -> bool:
        """Whether `arrived` may say anything but False now (no I/O)."""
        ...

    async def arrived(self, workflow: str, marker: str) -> bool:
        """Whether ``marker`` is recorded for ``workflow`` now (cheap when unlikely)."""
        ...


class Context:
    """A workflow body's handle on the durable world, given as its first parameter.

    Recorded steps, time, randomness, sleeps, messages, events and children: each call is
    recorded under its name and occurrence, so every pass (the body re-runs from the top)
    sees what the first one saw. A cancel of the workflow is raised in the body as
    `asyncio.CancelledError` at its next step, sleep, ``recv`` or child. Made by the App for
    each pass; never constructed by hand.
    """

    def __init__(
        self,
        run: Execution,
        start: Mapping[str, Any],
        kind: str,
        *,
        cancels: CancelWatch | None = None,
        limits: Limits | None = None,
        encode_args: Callable[[tuple[Any, ...], dict[str, Any]], dict[str, object]] | None = None,
        usage: Callable[[StateDelta], Awaitable[None]] | None = None,
    ) -> None:
        self._run = run
        self._usage = usage
        self._key = run.workflow
        """The engine's key of the workflow (`tenancy.workflow_key`)."""
        self._tenant, self._id = tenancy.scope(run.workflow, start)
        self._start = start
        self._kind = kind
        self._cancels = cancels
        self._limits = limits or Limits()
        self._encode_args = encode_args
        self._started = 0  # workflows this body started so far, children included
        # The body's own task: step calls it makes take positions in the body's sequence
        # (`_drift`); steps it runs need no guard against a sibling's cancel.
        self._task = asyncio.current_task()
        self._made = 0
        """Step calls the body's own task has made in this pass (the next one's position)."""
        self._counts: dict[str, int] = {}
        self._consumed: set[str] = set()
        # The messages not yet taken, per topic: built from the records at the first
        # fresh `recv` of the pass, so each `recv` reads only its own topic's queue.
        self._inbox: dict[str, deque[str]] | None = None
        self._continued: ContinueAsNew | None = None
        recorded = run.recorded
        self._records = recorded
        """The pass's records (a live, read-only view)."""
        self._placement: Placement | None = None  # read when first needed (`_drifted`)
        generation, unmet, retries, ended, messages = layout.survey(recorded)
        # Messages count against no limit (`_room`): the body's own records do.
        self._messages = messages
        # Records not yet met in this pass: while any remain, the body is replaying.
        self._unmet = unmet
        self.generation = generation
        """The resume generation this pass runs in (1, plus one per resume)."""
        self._ended = ended or layout.RESULT in recorded
        """Whether the records may hold an end of this generation (`layout.ending`)."""
        self._cancel_key = layout.cancel_key(self.generation)
        timeout_at = start.get("timeout_at")
        self.deadline: float | None = None if timeout_at is None else float(timeout_at)
        """When the workflow's ``timeout`` cancels it (the caller's clock), if it has one."""
        self._timed_out = self.deadline is not None and run.clock.now() >= self.deadline
        self._stopped: WorkflowStopped | None = None
        self._cancel_delivered = False
        self._cancel_arrived = False
        # A timeout or a cancel this pass began with (the pass's own writes never add the
        # marker; one made later is `_cancel_arrived`): without either, `_deliver_cancel`
        # has nothing to deliver.
        self._cancel_due = self._timed_out or self._cancel_key in recorded
        # Whether an earlier pass left any step's retry deadline (`layout.retry_key`):
        # without one, a fresh step's first attempt needs no look for its own.
        self._retries_recorded = retries

    @functools.cached_property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger that stays quiet while the body replays recorded work."""
        return _ReplayQuiet(logging.getLogger(f"durably.workflow.{self._kind}"), self)

    # --- who we are -----------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The workflow's id (unique within its tenant)."""
        return self._id

    @property
    def kind(self) -> str:
        """The workflow's kind (its registered name)."""
        return self._kind

    @property
    def tenant(self) -> str:
        """The tenant the workflow was started for."""
        return self._tenant

    @property
    def parent(self) -> str | None:
        """The parent workflow's id, for a child."""
        parent = self._start.get("parent")
        return None if parent is None else str(parent)

    @property
    def run_number(self) -> int:
        """The workflow's run: 1, plus one per `continue_as_new`.

        Each run has a history of its own.
        """
        return int(self._start.get("run", 1))

    @property
    def replaying(self) -> bool:
        """Whether the body is still re-running work an earlier pass recorded."""
        return bool(self._unmet)

    # --- recorded calls ---------------------------------------------------------------------

    def now(self) -> Awaitable[datetime]:
        """The current time (UTC), recorded: every pass sees the first pass's reading."""
        key = self._next(f"{layout.PREFIX}now")
        clock = self._run.clock

        async def read() -> datetime:
            stamp = await self._record(key, clock.now)
            return datetime.fromtimestamp(float(stamp), UTC)  # type: ignore[arg-type]

        return read()

    def uuid(self) -> Awaitable[uuid.UUID]:
        """A fresh random UUID, recorded: every pass sees the same one."""
        key = self._next(f"{layout.PREFIX}uuid")

        async def make() -> uuid.UUID:
            return uuid.UUID(str(await self._record(key, lambda: str(uuid.uuid4()))))

        return make()

    async def sleep(self, duration: Duration) -> None:
        """Sleep without holding a worker.

        The pass ends and the workflow is woken at the deadline the first pass recorded;
        a later pass past it does not sleep again. A duration of zero returns at once.

        Args:
            duration: How long, in seconds or a timedelta.

        Raises:
            InvalidInputError: A ``duration`` that is negative or not finite.
        """
        seconds = seconds_of(duration, "duration", zero=True)
        await self._sleep_until(self._run.clock.now() + seconds)

    async def sleep_until(self, when: datetime) -> None:
        """Sleep until a point in time without holding a worker.

        Returns at once when ``when`` has passed. Recorded like `sleep`: every pass keeps
        the deadline the first pass recorded.

        Args:
            when: A timezone-aware datetime, measured on the App's clock as `now` is.

        Raises:
            InvalidInputError: ``when`` is not a datetime, or is naive (no timezone).
        """
        if not isinstance(when, datetime):
            raise InvalidInputError(f"sleep_until needs a datetime, got {type(when).__name__}")
        if when.utcoffset() is None:
            raise InvalidInputError(
                f"sleep_until needs a timezone-aware datetime, got naive {when.isoformat()}; "
                "give it a tzinfo (datetime.UTC, or a ZoneInfo)"
            )
        await self._sleep_until(when.timestamp())

    async def _wait_to_begin(self) -> None:
        """Sleep durably until a delayed start's time (``start(delay=)`` or ``at=``).

        Under a key of its own, so the body's own sleeps keep their numbers.
        """
        not_before = self._start.get("not_before")
        if not isinstance(not_before, int | float) or isinstance(not_before, bool):
            return
        await self._sleep_at(layout.BEGINS, float(not_before))

    async def _wait_for_debounce(
        self, take: Callable[[], Awaitable[object]], release: Callable[[], Awaitable[object]]
    ) -> str | None:
        """Wait until a debounced workflow's slot lets it begin; the arguments to run with.

        ``take`` asks the store (`WorkQueue.begin_debounced`) and answers a `Begun` as a
        dict; each answer is recorded, and each later due time slept to durably, so every
        pass reads the same ones. None: run with the start record's arguments. Once the
        arguments taken are recorded, ``release`` deletes the slot (a recorded step too,
        so it runs once): a pass that dies before the record takes them again.
        """
        for round in itertools.count():
            key = f"{layout.DEBOUNCED}#{round}"
            self._meet(key)
            self._room(key)
            taken: object = await self._run.step(key, take)
            answer = taken if isinstance(taken, dict) else {}
            due = answer.get("due")
            if not isinstance(due, int | float) or isinstance(due, bool):
                args = answer.get("args")
                if not isinstance(args, str):
                    return None
                await self._record(layout.RELEASED, release)
                return args
            await self._sleep_at(f"{layout.DEBOUNCED}:wait#{round}", float(due))
        return None  # pragma: no cover - the loop returns

    async def _sleep_until(self, deadline: float) -> None:
        await self._sleep_at(self._next(f"{layout.PREFIX}sleep"), deadline)

    async def _sleep_at(self, key: str, deadline: float) -> None:
        """Sleep durably under ``key`` until ``deadline`` (the first pass's, once recorded)."""
        self._meet(key)
        self._room(key)
        due = self._run.recorded.get(key)
        if not isinstance(due, int | float) or due > self._run.clock.now():
            await self._look()
            self._deliver_cancel()  # a sleep not over yet is where a cancel is seen
        await self._run.sleep_until(key, deadline)

    async def gather(self, *aws: Awaitable[Any], return_exceptions: bool = False) -> list[Any]:
        """Run awaitables concurrently: `asyncio.gather` as a durable pass needs it.

        When one suspends (a `recv`, a `sleep`, a `child`), the others run on until they
        finish or suspend too, and then the suspension is raised: the pass ends sleeping
        until the earliest deadline, or blocked on everything waited for. When one fails,
        the others are cancelled, as a task group cancels them (a step already running
        finishes and is recorded first), and the failure is raised once they ended. A bare
        ``asyncio.gather`` of steps never pays a step twice either, but leaves the other
        branches running when one fails and keeps only the first error.

        Args:
            *aws: Step calls, waits, children, coroutines of the body.
            return_exceptions: Return an exception in its branch's place instead of
                raising it, cancelling nothing (suspensions are raised all the same).

        Returns:
            Their results, in the order given.

        Raises:
            InvalidInputError: An argument is not awaitable (nothing is started).
        """
        return await gather(aws, return_exceptions)

    async def step(self, key: str, fn: Callable[[], Awaitable[T] | T]) -> T:
        """Run ``fn`` once across every pass, recorded under an explicit ``key``.

        The engine's inline form of a step: the first pass that reaches the call runs
        ``fn``; later passes return its recorded value. The value must be plain JSON.

        Args:
            key: The record's key, one per call in the workflow.
            fn: A function of no arguments that returns the value (or an awaitable of it).

        Returns:
            The recorded value.

        Raises:
            InvalidInputError: A ``key`` that is not a usable id.
            ConfigurationError: A ``key`` starting with ``durably:`` or ``inbox:`` (reserved).
            ValueError: The ``key`` was used twice in one pass.
        """
        layout.user_key(identifier(key, "step key"), "step key")
        self._meet(key)
        self._room(key)
        self._deliver_cancel(key)
        if StepWatch.wanted():
            return await watched(self, "step", key, lambda: self._run.step(key, fn))
        return await self._run.step(key, fn)

    async def transact(
        self, key: str, effect: object, parse: Callable[[object], T] | None = None
    ) -> T:
        """Run a store-specific ``effect`` and record its value in one commit, once.

        For an effect that must commit with its record (`durably.engine.Execution.transact`):
        SQL backings and Redis Lua effects.

        Args:
            key: The record's key, one per call in the workflow.
            effect: The store's effect: a cursor callback on SQL stores, a `LuaEffect` on
                Redis, a function over the records on memory.
            parse: Makes the value returned from the recorded one (default: returned as
                recorded).

        Returns:
            The recorded value, through ``parse``.

        Raises:
            InvalidInputError: A ``key`` that is not a usable id.
            ConfigurationError: A ``key`` starting with ``durably:`` or ``inbox:`` (reserved).
            ValueError: The ``key`` was used twice in one pass.
        """
        layout.user_key(identifier(key, "step key"), "step key")
        self._meet(key)
        self._room(key)
        self._deliver_cancel(key)
        if StepWatch.wanted():
            return await watched(self, "transact", key, lambda: self._transact(key, effect, parse))
        return await self._transact(key, effect, parse)

    async def _transact(self, key: str, effect: object, parse: Callable[[object], T] | None) -> T:
        if parse is None:
            return await self._run.transact(key, effect)
        return await self._run.transact(key, effect, parse)

    def patched(self, change: str) -> Awaitable[bool]:
        """Whether this workflow runs the code after change ``change`` at this point.

        True for a workflow that reaches it fresh, False for one whose earlier passes
        already went past it on the old code. Recorded, so the answer never changes.

        Args:
            change: The change's id, asked at most once per pass.

        Returns:
            An awaitable of the answer.

        Raises:
            InvalidInputError: A ``change`` that is not a usable id (at the call).
            ValueError: The same ``change`` asked twice in one pass.
        """
        key = f"{layout.PREFIX}patched:{identifier(change, 'change id')}"
        fresh = not self.replaying

        async def answer() -> bool:
            return bool(await self._record(key, lambda: fresh))

        return answer()

    def add_usage(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cost_micros: int = 0,
        requests: int = 0,
    ) -> Awaitable[None]:
        """Add tokens and cost to this workflow's run record, once per call site.

        The amounts are added server-side, so the usage of concurrent branches all lands;
        the call is recorded, so a replay of the body does not add it again. The key is
        taken at the call, as a step's is.

        Args:
            input_tokens: Prompt tokens billed.
            output_tokens: Completion tokens billed.
            cache_read_tokens: Tokens read from the provider's prompt cache.
            cache_write_tokens: Tokens written to the provider's prompt cache.
            cost_micros: What the call cost, in millionths of a dollar.
            requests: Model requests made.

        Raises:
            InvalidInputError: An amount that is not an int, negative, or over 2**63 - 1
                (at the call, before anything is stored).
        """
        delta = usage_delta(
            {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_read_tokens": cache_read_tokens,
                "cache_write_tokens": cache_write_tokens,
                "requests": requests,
                "cost_micros": cost_micros,
            }
        )
        key = self._next(f"{layout.PREFIX}usage")
        usage = self._usage

        async def add() -> object:
            if usage is not None:
                await usage(delta)
            return delta.model_dump(mode="json")

        async def record() -> None:
            await self._record(key, add)

        return record()

    async def set_event(self, key: str, value: object) -> None:
        """Publish ``value`` as the latest value of event ``key``; recorded.

        Read it from outside with `WorkflowHandle.get_event`.

        Args:
            key: The event's key.
            value: Any value pydantic encodes as JSON (a model, a dataclass, a datetime...).

        Raises:
            InvalidInputError: A ``key`` that is empty, over 400 bytes or not storable text,
                or a ``value`` that cannot be encoded.
        """
        layout.bounded(key, "event key")
        try:
            data = ANY.encode(value)
        except Exception as exc:
            raise InvalidInputError(f"event {key!r}: cannot encode the value: {exc}") from None
        name = layout.event_key(key, self._count(f"{layout.EVENT}{key}"))
        self._meet(name)
        self._room(name)
        await self._run.step(name, lambda: data)

    async def recv(self, topic: Topic[T], timeout: Duration | None = None) -> T | None:
        """Receive the next message sent to this workflow on ``topic``.

        The pass ends while it waits (no worker is held). What was consumed (the message's
        value with it), or that it timed out, is recorded: a message arriving after the
        timeout is kept for the next `recv`. A message taken is deleted when the pass ends.

        Args:
            topic: The topic to receive on.
            timeout: How long to wait, in seconds or a timedelta (default: for ever).

        Returns:
            The message, decoded to the topic's type; None once ``timeout`` has passed
            without one.

        Raises:
            InvalidInputError: ``topic`` is not a `Topic`, or a ``timeout`` that is not a
                positive duration.
            IncompatibleRecordError: The message no longer fits the topic's type; the
                workflow parks.
        """
        if not isinstance(topic, Topic):
            raise InvalidInputError(f"recv needs a durably.Topic, got {type(topic).__name__}")
        seconds = None if timeout is None else seconds_of(timeout, "timeout")
        key = self._next(f"{layout.RECV}{topic.name}")
        deadline, waited = f"{key}:deadline", f"{key}:waited"
        # What an earlier pass left at this wait counts as met whichever way this pass
        # goes, or the rest of the body would pass for a replay (`replaying`, `patched`).
        for mark in (key, deadline, waited):
            self._meet(mark)
        await self._look(key)
        self._deliver_cancel(key)
        recorded = self._run.recorded
        if key not in recorded:
            self._room(key)
            chosen = self._next_message(topic)
            if chosen is None:
                if seconds is None:
                    # A pass that suspends here leaves a record of having reached it, so
                    # code changed before this point takes the old path on later passes.
                    await self._run.step(waited, lambda: True)
                    raise self._run.suspend(MessageNeeded(key))
                await self._run.sleep(deadline, seconds)
            outcome: dict[str, object] = {"t": True}
            if chosen is not None:
                message = recorded.get(chosen)
                outcome = layout.received(
                    chosen, message.get("value") if isinstance(message, dict) else None
                )
            taken: object = await self._run.step(key, lambda: outcome)
        else:
            taken = await self._run.step(key, lambda: None)
        message_key = layout.taken_message(taken)
        if message_key is None:
            return None
        self._consumed.add(message_key)
        assert isinstance(taken, dict)
        if "v" in taken:
            data = taken["v"]
            if message_key in recorded:
                # Its value is in this record now: the message goes when the pass ends.
                self._run.consumed(message_key)
        else:  # written before recv records kept the value: the message holds it
            message = recorded.get(message_key)
            data = message.get("value") if isinstance(message, dict) else None
        return self._decode(topic.value, data, message_key)  # type: ignore[no-any-return]

    def continue_as_new(self, *args: Any, **kwargs: Any) -> NoReturn:
        """End this run of the workflow and begin it afresh with new arguments.

        The new run starts from the top with an empty history, as if started again under
        the same id, tenant and parent: its handles stay valid, and
        `WorkflowHandle.result` waits for the last run's result. Messages sent and not yet
        taken by a `recv` are kept for the new run, and so is a cancel (one already known
        here is delivered instead, as at any call). A plain call, not awaited: it does not
        return.

        Args:
            *args: The body's arguments for the new run.
            **kwargs: The body's keyword arguments for the new run.

        Raises:
            ContinueAsNew: Always, ending the run (a `BaseException`: let it through).
            InvalidInputError: Arguments that do not fit the body's parameters (checked
                here, ending nothing).
        """
        if self._encode_args is None:
            raise InvalidInputError("continue_as_new needs a workflow registered on an App")
        arguments = self._encode_args(args, kwargs)
        self._deliver_cancel()
        self._continued = ContinueAsNew(arguments)
        raise self._continued

    # --- children ---------------------------------------------------------------------------

    @overload
    async def child(
        self, fn: Workflow[P, T] | WorkflowOptions[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T: ...

    @overload
    async def child(
        self,
        fn: Workflow[Any, T] | WorkflowOptions[Any, T],
        /,
        *args: Any,
        id: str | None,
        **kwargs: Any,
    ) -> T: ...

    async def child(  # type: ignore[misc]  # (no body parameter is named id: as `start`)
        self, fn: Any, /, *args: Any, id: str | None = None, **kwargs: Any
    ) -> Any:
        """Start (or find) a child workflow and wait for its result, without holding a worker.

        The pass ends until the child ends. Recorded like a step. The child runs for this
        workflow's tenant and is cancelled with it. A workflow already at the child's id is
        taken for the child only if its start names this workflow as its parent. Give the
        child's ``id`` (and a ``timeout``) with `Workflow.options` to keep its arguments
        checked by a type checker: ``await ctx.child(notify.options(id="n-1"), text)``.

        Args:
            fn: The child's workflow, as `App.workflow` made it, or its `Workflow.options`.
            *args: The child body's arguments.
            id: The child's id. Default: one derived from this workflow's id, the child's
                kind and the call's occurrence.
            **kwargs: The child body's keyword arguments.

        Returns:
            The child's return value, decoded to its annotated type.

        Raises:
            InvalidInputError: ``fn`` is not a workflow; arguments that do not fit its
                parameters; a bad ``id`` (one of the derived form or starting with
                ``durably:`` included), or one naming this workflow or its parent; a
                derived id too long for a key (give an ``id``); a ``tenant`` option (a
                child runs in its parent's tenant).
            WorkflowConflictError: The id exists under another kind, or names a workflow
                that is not this one's child.
            WorkflowLimitError: This body has started as many workflows as the App's
                `Limits` allow, the child would be deeper than they allow, or its
                tenant holds as many workflows as its per-tenant caps allow.
            ChildWorkflowFailedError: The child failed or was cancelled (or was swept
                before this workflow read how it ended); it carries the child's failure
                (``error``, ``type``, ``message`` and ``step``), as `WorkflowFailedError`.
            IncompatibleRecordError: The child's result no longer fits its annotated type;
                the workflow parks.
        """
        fn, id, timeout, priority = child_options(fn, id)
        key, handle = await self._start_workflow(
            fn, args, kwargs, id=id, tenant=None, timeout=timeout, child=True, priority=priority
        )
        end = layout.end_key(key)
        self._meet(end)
        self._deliver_cancel(end)
        if end in self._run.recorded:
            ended: object = await self._run.step(end, lambda: None)
        else:
            outcome = await self._ending_of(handle)
            if outcome is None:
                # The child wakes this workflow when it ends.
                raise self._run.suspend(InputNeeded(end))
            ended = await self._run.step(end, lambda: outcome)
        if not isinstance(ended, dict) or "v" not in ended:
            outcome = ended if isinstance(ended, dict) else {}
            error = outcome.get("e")
            details = layout.failure_details(outcome)
            if outcome.get("cancelled"):
                details.update(type="WorkflowCancelledError", message=str(error))
            raise ChildWorkflowFailedError(
                handle.id, None if error is None else str(error), **details
            )
        return self._decode(fn.signature.result, ended["v"], end)

    @overload
    async def start_child(
        self, fn: Workflow[P, T] | WorkflowOptions[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> WorkflowHandle[T]: ...

    @overload
    async def start_child(
        self,
        fn: Workflow[Any, T] | WorkflowOptions[Any, T],
        /,
        *args: Any,
        id: str | None,
        **kwargs: Any,
    ) -> WorkflowHandle[T]: ...

    async def start_child(  # type: ignore[misc]  # (as `child`)
        self, fn: Any, /, *args: Any, id: str | None = None, **kwargs: Any
    ) -> Any:
        """Start (or find) a child workflow and return its handle without waiting (fan-out).

        Recorded like a step; the child's id, tenant and options are as for `child`.

        Args:
            fn: The child's workflow, as `App.workflow` made it, or its `Workflow.options`.
            *args: The child body's arguments.
            id: The child's id. Default: one derived from this workflow's id, the child's
                kind and the call's occurrence.
            **kwargs: The child body's keyword arguments.

        Returns:
            The child's typed handle.

        Raises:
            InvalidInputError: ``fn`` is not a workflow; arguments that do not fit its
                parameters; a bad ``id``, or one naming this workflow or its parent; a
                derived id over 512 bytes (give an ``id``); a ``tenant`` option.
            WorkflowConflictError: The id exists under another kind.
            WorkflowLimitError: This body has started as many workflows as the App's
                `Limits` allow, the child would be deeper than they allow, or its
                tenant holds as many workflows as its per-tenant caps allow.
        """
        fn, id, timeout, priority = child_options(fn, id)
        _, handle = await self._start_workflow(
            fn, args, kwargs, id=id, tenant=None, timeout=timeout, child=True, priority=priority
        )
        return handle

    async def _start_workflow(
        self,
        fn: Workflow[Any, T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        id: str | None,
        tenant: str | None,
        timeout: Duration | None,
        child: bool,
        begins: Begins = AT_ONCE,
        priority: WorkPriority | None = None,
    ) -> tuple[str, WorkflowHandle[T]]:
        if not callable(getattr(fn, "prepare", None)) or not isinstance(
            getattr(fn, "kind", None), str
        ):
            what = "child" if child else "start"
            raise InvalidInputError(
                f"ctx.{what} needs a workflow (@app.workflow), got {type(fn).__name__}"
            )
        key = self._next(f"{layout.CHILD if child else layout.STARTED}{fn.kind}")
        self._meet(key)
        self._room(key)
        await self._look(key)  # a cancel just made must stop a fan-out before it starts
        self._deliver_cancel(key)
        self._started += 1
        depth = layout.depth_of(self._start) + 1
        if key not in self._records:  # a start recorded before is never refused
            check_start(
                self._limits,
                tenant=self.tenant,
                workflow=self.id,
                started=self._started,
                depth=depth,
            )
        if id is not None:
            workflow = tenancy.new_id(id)
            tries = [workflow]
        else:
            # Each run of a workflow continued as new starts children of its own.
            run = "" if self.run_number == 1 else f"run{self.run_number}/"
            workflow = f"{self.id}/{run}{key[len(layout.PREFIX) :]}"
            # Next in line when a workflow that is not this body's holds the derived id
            # (one stored before such ids were refused from users).
            tries = [workflow, *(f"{workflow}~{n}" for n in range(2, DERIVED_TRIES + 1))]
        owner = self.tenant if child or tenant is None else tenancy.tenant_of(tenant, "")
        try:
            tenancy.workflow_key(owner, tries[-1])
        except InvalidInputError:
            if id is not None:
                raise
            raise InvalidInputError(
                f"workflow {self.id[:40]!r}…: the id derived for its workflow of kind "
                f"{fn.kind[:40]!r} would be too long for a key; give it an id="
            ) from None
        if child and workflow in (self.id, self._start.get("parent")):
            raise InvalidInputError(
                f"workflow {self.id!r} cannot wait for {workflow!r} as its child: it is "
                "the workflow itself or its parent, which waits for it"
            )
        start = fn.prepare(
            args,
            kwargs,
            tenant=owner,
            timeout=timeout,
            parent=self.id if child else None,
            parent_kind=self.kind if child else None,
            parent_key=self._key if child else None,
            depth=depth,
            begins=begins,
            priority=priority,
            # A child's end wakes its parent, at the parent's priority (as it was moved).
            parent_priority=(
                layout.priority_of(self._run.recorded, self._start) if child else DEFAULT_PRIORITY
            ),
        )

        async def launch() -> object:
            try:
                for chosen in tries[:-1]:
                    try:
                        at, created = await fn.launch(chosen, start)
                    except WorkflowConflictError:
                        continue
                    return {"id": chosen, "key": at, "created": created}
                at, created = await fn.launch(tries[-1], start)
            except WorkflowLimitError as exc:
                # The tenant's cap, counted by the store: recorded, so every pass of this
                # body sees the same refusal (a replay must not start what was refused).
                return {"refused": [exc.limit, exc.maximum, exc.count]}
            return {"id": tries[-1], "key": at, "created": created}

        started: object = await self._run.step(key, launch)
        info = started if isinstance(started, dict) else {}
        refused = info.get("refused")
        if isinstance(refused, list) and len(refused) == 3:
            limit, maximum, count = refused
            raise WorkflowLimitError(owner, workflow, str(limit), int(maximum), int(count))
        chosen = str(info.get("id", workflow))
        return key, fn.handle(
            chosen,
            owner,
            created=bool(info.get("created", False)),
            key=layout.started_key(info, chosen),
        )

    async def _ending_of(self, child: WorkflowHandle[Any]) -> dict[str, object] | None:
        """How ``child`` ended, read from its records (`layout.ending`); None while it runs.

        A child swept before this workflow read its end counts as failed.
        """
        checkpointer = (await child._core.stores()).checkpointer
        stored = await checkpointer.load(child._key)
        outcome = layout.ending(stored)
        if outcome is None and layout.START not in stored:
            # Swept (its retention ran out) before this workflow read how it ended.
            outcome = {"e": "its records were swept before its parent read its end"}
        return outcome

    async def _outside(self, name: str, call: Callable[[], Awaitable[object]]) -> object:
        """Run an App call made inside the body (a send, a cancel) once, recorded."""
        key = self._next(f"{layout.PREFIX}{name}")
        self._meet(key)
        self._room(key)
        await self._look(key)
        self._deliver_cancel(key)
        return await self._run.step(key, call)

    # --- internals -----------------------------------------------------------------------

    def _count(self, name: str) -> int:
        count = self._counts.get(name, 0) + 1
        self._counts[name] = count
        return count

    def _next(self, name: str) -> str:
        return layout.occurrence(name, self._count(name))

    def _drifted(self, key: str, position: int) -> NondeterminismError | None:
        """The drift of step ``key`` called at ``position`` in the body's sequence.

        An error if an earlier pass recorded another step there (`_drift.Placement`);
        None otherwise.
        """
        if self._placement is None:
            self._placement = Placement(self._records)
        return self._placement.drift(self.id, key, position, self._unmet)

    def _meet(self, key: str) -> None:
        self._unmet.discard(key)

    async def _record(self, key: str, make: Callable[[], object]) -> object:
        self._meet(key)
        self._room(key)
        return await self._run.step(key, make)

    def _next_message(self, topic: Topic[Any]) -> str | None:
        """Take the oldest message on ``topic`` no `recv` took; its key, or None.

        Taken with no await, so two concurrent `recv` calls never take one message.
        """
        if self._inbox is None:
            self._inbox = self._index_inbox()
        waiting = self._inbox.get(topic.name)
        while waiting:
            key = waiting.popleft()
            if key not in self._consumed:
                self._consumed.add(key)
                return key
        return None

    def _index_inbox(self) -> dict[str, deque[str]]:
        """Index the stored messages per topic, in send order.

        One look at the records per pass; those a `recv` record already took go into
        `_consumed` on the way.
        """
        inbox: dict[str, deque[str]] = {}
        for key, value in self._records.items():
            if is_inbox_key(key):
                if isinstance(value, dict):
                    inbox.setdefault(str(value.get("topic")), deque()).append(key)
            elif key.startswith(layout.RECV):
                taken = layout.taken_message(value)
                if taken is not None:
                    self._consumed.add(taken)
        return inbox

    def _room(self, key: str) -> None:
        """Park the workflow before a fresh record at ``key`` passes ``Limits.records``.

        Stored messages are not counted; a replayed record is never refused.

        Raises:
            RecordLimitError: The run holds as many records as the limit allows.
        """
        if len(self._records) - self._messages >= self._limits.records and key not in self._records:
            raise self._park(RecordLimitError(self.id, self._limits.records))

    def _decode(self, value: Value, data: object, key: str) -> Any:
        try:
            return value.decode(data)
        except (ValueError, RecursionError) as exc:
            raise self._park(
                IncompatibleRecordError(self.id, key, value.type_name, stored_text(data), str(exc))
            ) from None

    def _park(self, error: WorkflowStopped) -> WorkflowStopped:
        # Kept so the pass parks even if the body catches the error.
        if self._stopped is None:
            self._stopped = error
        return error

    async def _look(self, key: str | None = None) -> None:
        """Look for a cancel made since the pass began, before a call new to the body.

        That is a call at ``key`` the body has not made before (any call, without one), and
        only when a cancel may be known (`CancelWatch.due`: at once for this process's own,
        at most every `LOOK_SECONDS` for another's). `recorded_call` does the same, written
        out.
        """
        if key is not None and key in self._records:
            return  # a replayed call: the cancel lands where it first could
        if self._cancels is not None and self._cancels.due(self._key):
            self._cancel_arrived = await self._cancels.arrived(self._key, self._cancel_key)

    def _deliver_cancel(self, key: str | None = None) -> None:
        """Raise the cancellation (once per pass) at a point the body has not passed before.

        A call whose ``key`` is recorded replays, so a cancel lands where it first could, on
        every pass alike.
        """
        if self._cancel_delivered:
            return
        if not (self._cancel_due or self._cancel_arrived):
            # Nothing to deliver, the common case, asked before every call: unless the
            # workflow's deadline passed while this pass ran.
            if self.deadline is None or self._run.clock.now() < self.deadline:
                return
            self._timed_out = self._cancel_due = True
        if key is None or key not in self._records:
            self._cancel_delivered = True
            reason = "timed out" if self._timed_out else "was cancelled"
            raise asyncio.CancelledError(f"workflow {self.id!r} {reason}")


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is an ``async def`` function."""
    return inspect.iscoroutinefunction(fn)


# The variable's own methods, not functions around them: every step call binds and
# unbinds its attempt.
bind = _current.set
"""Make ``current`` (a workflow body's Context, a step attempt, or None) what this task
runs in; gives the token `unbind` takes."""
unbind = _current.reset
"""Undo `bind`."""


__all__ = [
    "Attempt",
    "CancelWatch",
    "Context",
    "StepContext",
    "bind",
    "context",
    "current_tenant",
    "current_workflow",
    "is_async",
    "unbind",
]
