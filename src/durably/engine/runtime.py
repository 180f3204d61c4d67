"""The stepwise runtime: `Execution` and `resume` turn an ordinary ``async def`` into a durable
workflow whose named steps run once across every pass."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar, cast

from durably.clock import Clock, SystemClock
from durably.engine.tasks import stop
from durably.errors import (
    Contended,
    Fenced,
    InputNeeded,
    MessageNeeded,
    ScheduledWakeup,
    Suspended,
    Swallowed,
)
from durably.stores.workflows import (
    MAX_NAMED_KEYS,
    Blocked,
    Checkpointer,
    Completed,
    Entry,
    Pass,
    Recorded,
    Sleeping,
    is_inbox_key,
    message_keys,
    step_key,
)
from durably.validation import identifier, positive, positive_int

T = TypeVar("T")
R = TypeVar("R")

_logger = logging.getLogger(__name__)

Parse = Callable[[object], T]
Body = Callable[["Execution"], Awaitable[T]]


def _identity(value: object) -> Any:
    return value


class Execution:
    """What a workflow body sees during one pass: steps that run once, durable sleeps,
    and values or messages from outside.

    Built by `resume`; a body never constructs one itself.
    """

    def __init__(
        self,
        holder: Pass,
        checkpointer: Checkpointer[Any],
        records: dict[str, object],
        clock: Clock,
    ) -> None:
        self._holder = holder
        self._checkpointer = checkpointer
        self._records = records
        self._clock = clock
        self._used: set[str] = set()
        self._suspensions: list[Suspended] = []
        self._cursor: str | None = None
        self._consumed: list[str] = []
        # The refusal of a write that found this pass superseded, kept so the pass ends
        # `Fenced` even if the body absorbed it (a gather with return_exceptions=True).
        self._fenced: Fenced | None = None
        self.replayed = 0
        """Steps answered from the record in this pass (their effects did not run)."""
        self.performed = 0
        """Steps whose effects ran in this pass."""

    @property
    def workflow(self) -> str:
        """The workflow this pass belongs to."""
        return self._holder.workflow

    @property
    def holder(self) -> Pass:
        """The claim this pass runs under."""
        return self._holder

    @property
    def clock(self) -> Clock:
        """The caller's clock, which `sleep` deadlines are measured on."""
        return self._clock

    @property
    def recorded(self) -> Mapping[str, object]:
        """Every record this pass knows (loaded at its start, plus its own writes),
        read-only; inbox messages included under their ``inbox:`` keys."""
        return MappingProxyType(self._records)

    @property
    def suspensions(self) -> tuple[Suspended, ...]:
        """Every suspension raised in this pass so far."""
        return tuple(self._suspensions)

    async def step(
        self,
        key: str,
        effect: Callable[[], Awaitable[object] | object],
        parse: Parse[T] = _identity,
    ) -> T:
        """Run ``effect`` once across every pass and return ``parse`` of its recorded value.

        A recorded step returns without running its effect. Once the effect returned, its
        write is shielded from cancellation. Raises `ValueError` for a name used twice in
        one pass or in the inbox key space, and `Fenced` if this pass was superseded.
        """
        if self.reserve(key):
            return parse(self._records[key])
        value = effect()
        if inspect.isawaitable(value):
            value = await value
        # `commit` without its check (this pass reserved the key just now) and without a
        # coroutine of its own: every engine step writes here.
        self.performed += 1
        recorded = await self._write(self._checkpointer.record(self._holder, key, value))
        return parse(self._land(key, recorded))

    def reserve(self, key: str) -> bool:
        """Take ``key`` for a step of this pass, as `step` does before anything else: True
        when its value is recorded (read it from `recorded`; the effect must not run),
        False when the caller is to run the effect and `commit` its value.

        `step` is this and `commit` around an effect; the halves serve a caller that runs
        its effect inline, with no function to hand over (the App's step calls). Raises
        `ValueError` for a key used twice in one pass or in the inbox key space.
        """
        self._use(key)
        if key in self._records:
            self.replayed += 1
            return True
        return False

    async def commit(self, key: str, value: object) -> object:
        """Record ``value`` under ``key``, which `reserve` took fresh in this pass, and
        return the value as recorded (first writer wins). The write is shielded from
        cancellation, as `step`'s is. Raises `ValueError` for a key `reserve` did not take
        fresh, and `Fenced` if this pass was superseded."""
        if key not in self._used or key in self._records:
            raise ValueError(f"step key {key!r} was not reserved fresh in this pass")
        self.performed += 1
        recorded = await self._write(self._checkpointer.record(self._holder, key, value))
        return self._land(key, recorded)

    async def transact(self, key: str, effect: object, parse: Parse[T] = _identity) -> T:
        """Run a store-specific ``effect`` and record its value in one commit, once.

        The effect's type is the checkpointer's (a cursor callback on SQL stores, a
        `LuaEffect` on Redis, a function over the dict on memory).
        """
        self._use(key)
        if key in self._records:
            self.replayed += 1
            return parse(self._records[key])
        recorded = await self._write(self._checkpointer.transact(self._holder, key, effect))
        if recorded.first:
            self.performed += 1
        return parse(self._land(key, recorded))

    async def sleep(self, key: str, duration: float) -> None:
        """Sleep ``duration`` seconds of the caller's clock without holding a process.

        The deadline is recorded on the first pass; until it passes, the pass ends with
        `Sleeping`.
        """
        seconds = positive(duration, "duration")
        self._use(key)
        if key in self._records:
            wakeups = self._wakeup(key)
        else:
            deadline = self._clock.now() + seconds
            wakeups = []

            def landed(recorded: Recorded[object]) -> None:
                self._land(key, recorded)
                wakeups.extend(self._wakeup(key))

            # The wakeup is noted as the deadline lands, also when a sibling's suspension
            # cancels this sleep meanwhile: the pass must still be woken at the deadline.
            await self._write(self._checkpointer.record(self._holder, key, deadline), landed)
        if wakeups:
            raise wakeups[0]

    async def awaiting(self, key: str, parse: Parse[T] = _identity) -> T:
        """The value supplied under ``key`` from outside (`Durable.arrive`); until one
        arrives, the pass ends `Blocked` waiting for it."""
        self._use(key)
        if key in self._records:
            return parse(self._records[key])
        raise self._suspend(InputNeeded(key))

    async def receive(
        self, key: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Entry]:
        """The inbox messages after ``after`` (default: after the last message an earlier
        `receive` of this pass returned), at most ``limit``, recorded under ``key`` so
        every later pass gets the same batch. With none, the pass ends `Blocked`
        listening on ``key``."""
        if limit is not None:
            positive_int(limit, "limit")
        self._use(key)
        if key in self._records:
            keys = [str(k) for k in cast(list[object], self._records[key])]
        else:
            start = after if after is not None else self._cursor
            fresh = sorted(
                k for k in self._records if is_inbox_key(k) and (start is None or k > start)
            )
            if limit is not None:
                fresh = fresh[:limit]
            if not fresh:
                raise self._suspend(MessageNeeded(key))
            recorded = await self._write(self._checkpointer.record(self._holder, key, fresh))
            keys = [str(k) for k in cast(list[object], self._land(key, recorded))]
        if keys:
            self._cursor = max(keys) if self._cursor is None else max(self._cursor, *keys)
        return [Entry(k, self._records.get(k)) for k in keys]

    def consumed(self, key: str) -> None:
        """Note that the message under ``key`` was consumed by a record that keeps its
        value: when the body returns or suspends, `resume` deletes the messages so noted
        (one batched `forget`), so what a workflow stores of its inbox is what it has not
        yet consumed. Best effort: a delete that fails is left to a later pass that notes the
        same messages again. Raises `InvalidInputError` for a key not a message's."""
        message_keys([key])
        self._consumed.append(key)

    async def forget(self, keys: list[str]) -> int:
        """Delete the consumed messages under ``keys`` (`Checkpointer.forget`, in writes of
        at most `MAX_NAMED_KEYS` keys, shielded from cancellation as a step's write is)
        and drop them from `recorded`; the number deleted. Raises `InvalidInputError` for
        a key that is not a message's, and `Fenced` if this pass was superseded."""
        batches = [
            message_keys(keys[first : first + MAX_NAMED_KEYS])
            for first in range(0, len(keys), MAX_NAMED_KEYS)
        ]
        deleted = 0
        for batch in batches:
            deleted += await self._write(self._checkpointer.forget(self._holder, batch))
            for key in batch:
                self._records.pop(key, None)
        return deleted

    def pending(self, *keys: str) -> frozenset[str]:
        """Which of ``keys`` have no value yet, as this pass knows it (never suspends)."""
        for key in keys:
            identifier(key, "key")
        return frozenset(key for key in keys if key not in self._records)

    # -- internals ---------------------------------------------------------------------

    def _use(self, key: str) -> None:
        step_key(key, "step key")
        if key in self._used:
            raise ValueError(f"step key {key!r} used twice in one pass")
        self._used.add(key)

    def _land(self, key: str, recorded: Recorded[object]) -> object:
        self._records[key] = recorded.value
        return recorded.value

    def _suspend(self, suspension: Suspended) -> Suspended:
        self._suspensions.append(suspension)
        return suspension

    def _wakeup(self, key: str) -> list[ScheduledWakeup]:
        """The (noted) suspension of sleep ``key`` while its recorded deadline is ahead."""
        due = float(cast(float, self._records[key]))
        if self._clock.now() >= due:
            return []
        wakeup = ScheduledWakeup(key, due)
        self._suspend(wakeup)
        return [wakeup]

    async def _write(self, write: Awaitable[R], landed: Callable[[R], None] | None = None) -> R:
        """Await a checkpoint write to its end even if the caller is cancelled meanwhile;
        ``landed`` sees the result first, then the cancellation is delivered."""
        task = asyncio.ensure_future(write)
        cancelled = False
        while True:
            try:
                result = await asyncio.shield(task)
                break
            except asyncio.CancelledError:
                if task.cancelled():
                    raise
                cancelled = True
            except Fenced as fenced:
                if self._fenced is None:
                    self._fenced = fenced
                raise
        if landed is not None:
            landed(result)
        if cancelled:
            raise asyncio.CancelledError
        return result


Outcome = Completed[T] | Sleeping | Blocked


async def resume(
    holder: Pass,
    checkpointer: Checkpointer[Any],
    body: Body[T],
    *,
    clock: Clock | None = None,
    on_run: Callable[[Execution], None] | None = None,
) -> Outcome[T]:
    """Run one pass of ``body`` under ``holder`` and say how it ended.

    Returns `Completed`, `Sleeping` (the earliest deadline when several) or `Blocked`.
    Raises `Fenced`/`Contended` bare (also from inside task groups, and `Fenced` also when
    the body absorbed it and carried on), the body's own
    exception when it failed (a failure beats a suspension), and `Swallowed` when the body
    caught a suspension and returned.
    """
    records = await checkpointer.load(holder.workflow)
    run = Execution(holder, checkpointer, records, clock or SystemClock())
    if on_run is not None:
        on_run(run)
    try:
        value = await body(run)
    except BaseException as exc:
        suspended = _ended_by(run, exc)
        await _compact(run)
        return suspended
    if run._fenced is not None:
        raise run._fenced
    if run.suspensions:
        raise Swallowed(holder.workflow, run.suspensions)
    await _compact(run)
    return Completed(value)


async def _compact(run: Execution) -> None:
    """Delete the messages ``run`` noted as consumed (`Execution.consumed`) that are
    still stored; a store error is logged and left to a later pass."""
    keys = [key for key in dict.fromkeys(run._consumed) if key in run._records]
    run._consumed.clear()
    if not keys:
        return
    try:
        await run.forget(keys)
    except Exception:
        _logger.warning(
            "deleting %d consumed message(s) of workflow %r failed; a later pass will",
            len(keys),
            run.workflow,
            exc_info=True,
        )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        found: list[BaseException] = []
        for inner in exc.exceptions:
            found.extend(_leaves(inner))
        return found
    return [exc]


def _ended_by(run: Execution, exc: BaseException) -> Sleeping | Blocked:
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, Fenced | Contended):
            raise leaf from (exc if leaf is not exc else None)
    if any(not isinstance(leaf, Exception | Suspended) for leaf in leaves):
        raise exc  # cancellation, KeyboardInterrupt, SystemExit: not ours to classify
    if run._fenced is not None:  # the body absorbed the refusal, then failed or suspended
        raise run._fenced from exc
    failures = [leaf for leaf in leaves if isinstance(leaf, Exception)]
    if failures:
        if len(failures) == 1:
            raise failures[0] from (exc if failures[0] is not exc else None)
        raise ExceptionGroup("workflow body failed", failures) from exc
    suspensions = list(run.suspensions)
    suspensions.extend(
        leaf for leaf in leaves if isinstance(leaf, Suspended) and leaf not in suspensions
    )
    return outcome_of(suspensions)


def outcome_of(suspensions: list[Suspended]) -> Sleeping | Blocked:
    """The outcome several suspensions add up to: `Blocked` on everything waited and
    listened for, with the earliest deadline as its ``due`` if the body also sleeps;
    `Sleeping` at the earliest deadline if the body only sleeps."""
    wakeups = [s for s in suspensions if isinstance(s, ScheduledWakeup)]
    first = min(wakeups, key=lambda s: s.due) if wakeups else None
    listening = frozenset(s.key for s in suspensions if isinstance(s, MessageNeeded))
    waiting = frozenset(
        s.key for s in suspensions if not isinstance(s, MessageNeeded | ScheduledWakeup)
    )
    if waiting or listening:
        return Blocked(waiting, listening, None if first is None else first.due)
    assert first is not None, "a pass suspends on something"
    return Sleeping(first.key, first.due)


async def advance(
    workflow: str,
    checkpointer: Checkpointer[Any],
    body: Body[T],
    *,
    budget: float = 300.0,
    alive: float = 30.0,
    clock: Clock | None = None,
) -> Outcome[T]:
    """Claim ``workflow``, run one pass of ``body`` while renewing the claim, release it.

    Raises `Contended` when another live pass holds the workflow.
    """
    identifier(workflow, "workflow")
    holder = await checkpointer.claim(
        workflow, positive(budget, "budget"), positive(alive, "alive")
    )
    if holder is None:
        raise Contended(workflow)
    keepalive = asyncio.create_task(_keep_alive(checkpointer, holder, alive))
    try:
        return await resume(holder, checkpointer, body, clock=clock)
    finally:
        await stop(keepalive)
        await checkpointer.release(holder)


async def _keep_alive(checkpointer: Checkpointer[Any], holder: Pass, alive: float) -> None:
    # Renew at a third of the window so one slow round trip cannot let the claim lapse. A
    # renewal that fails (the store busy or away for a moment) is tried again at the next
    # turn: the claim lapses only if the failures outlast the window, never after one.
    while True:
        try:
            if not await checkpointer.renew(holder, alive):
                return  # superseded, or the budget is spent
        except Exception:
            _logger.warning(
                "renewing the claim on workflow %r failed; retrying",
                holder.workflow,
                exc_info=True,
            )
        await asyncio.sleep(alive / 3)


__all__ = ["Body", "Execution", "Outcome", "Parse", "advance", "outcome_of", "resume"]
