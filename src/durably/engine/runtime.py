"""The stepwise runtime: `Execution` and `resume` turn an ordinary ``async def`` into a durable
workflow whose named steps run once across every pass."""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar, cast

from durably.clock import Clock, SystemClock
from durably.engine.inflight import DRAIN_SECONDS, InFlight
from durably.engine.tasks import stop
from durably.errors import (
    Contended,
    Fenced,
    InputNeeded,
    InvalidInputError,
    MessageNeeded,
    PassEnded,
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

    Built by `resume`; a body never constructs one itself. A pass never ends while a step
    it started still runs: when the body ends, `resume` waits for the steps its branches
    still run (`drain`), then refuses any further step with `PassEnded`.
    """

    def __init__(
        self,
        holder: Pass,
        checkpointer: Checkpointer[Any],
        records: dict[str, object],
        clock: Clock,
        *,
        drain: float = DRAIN_SECONDS,
    ) -> None:
        self._holder = holder
        self._checkpointer = checkpointer
        self._records = records
        self._clock = clock
        self._used: set[str] = set()
        self._inflight = InFlight(drain)
        self._closed = False
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
        write is shielded from cancellation; an effect run in a branch of the body is
        shielded too (`guard`). Raises `ValueError` for a name used twice in one pass or in
        the inbox key space, `Fenced` if this pass was superseded, and `PassEnded` once the
        pass has ended.
        """
        self._use(key)
        if key in self._records:
            self.replayed += 1
            return parse(self._records[key])
        inflight = self._inflight
        inflight.hold(key)
        try:
            value = effect()
            if inspect.isawaitable(value):
                # An effect that awaits may be cut, or need a guard: its task is noted.
                if inflight.in_branch(inflight.take(key)):
                    return parse(await inflight.guard(self._perform(key, value)))
                value = await value
            # `commit` without its check (this pass reserved the key just now) and without
            # a coroutine of its own: every engine step writes here.
            self.performed += 1
            recorded = await self._write(self._checkpointer.record(self._holder, key, value))
            landed = self._land(key, recorded)
        finally:
            inflight.give_back(key)
        return parse(landed)

    async def _perform(self, key: str, effect: Awaitable[object]) -> object:
        """The rest of a step whose effect ``effect`` began: await it, record its value."""
        value = await effect
        self.performed += 1
        recorded = await self._write(self._checkpointer.record(self._holder, key, value))
        return self._land(key, recorded)

    def reserve(self, key: str, task: asyncio.Task[Any] | None = None) -> bool:
        """Take ``key`` for a step of this pass, as `step` does before anything else: True
        when its value is recorded (read it from `recorded`; the effect must not run),
        False when the caller is to run the effect and `commit` its value.

        `step` is this and `commit` around an effect; the halves serve a caller that runs
        its effect inline, with no function to hand over (the App's step calls). Between
        them the step counts as running (the pass waits for it before it reports): a
        caller whose effect ends without a value to commit calls `abandon`. Raises
        `ValueError` for a key used twice in one pass or in the inbox key space, and
        `PassEnded` once the pass has ended (the effect must not run). ``task`` is the task
        that runs the effect, for a caller that has it at hand (the current one if None).
        """
        self._use(key)
        if key in self._records:
            self.replayed += 1
            return True
        self._inflight.take(key, task)
        return False

    def abandon(self, key: str) -> None:
        """Give up ``key``, which `reserve` took fresh, without a value to commit (its
        effect was cut, or its retries wait in a durable sleep): the pass no longer waits
        for it, and a later pass runs the step. Repeating it, or calling it after
        `commit`, changes nothing."""
        self._inflight.give_back(key)

    async def commit(self, key: str, value: object) -> object:
        """Record ``value`` under ``key``, which `reserve` took fresh in this pass, and
        return the value as recorded (first writer wins). The write is shielded from
        cancellation, as `step`'s is. Raises `ValueError` for a key `reserve` did not take
        fresh, and `Fenced` if this pass was superseded."""
        if key not in self._used or key in self._records:
            raise ValueError(f"step key {key!r} was not reserved fresh in this pass")
        self.performed += 1
        try:
            recorded = await self._write(self._checkpointer.record(self._holder, key, value))
            return self._land(key, recorded)
        finally:
            self._inflight.give_back(key)

    async def guard(self, work: Awaitable[T]) -> T:
        """Await ``work``, the rest of a step a branch of the body started (its effect and
        its record), to its end even if the branch is cancelled from inside the body (a
        sibling's failure, a task group aborting on a suspension): the cancel reaches the
        branch once the record landed. Only the pass's own stop (the worker's shutdown, a
        lost claim) cuts it."""
        return await self._inflight.guard(work)

    def suspend(self, suspension: Suspended) -> Suspended:
        """Note ``suspension``, which the caller is about to raise, as one of this pass's
        and return it: the pass reports it even if the raise is lost on the way (a bare
        ``asyncio.gather`` keeps only the first of its branches' errors)."""
        return self._suspend(suspension)

    @property
    def busy(self) -> bool:
        """Whether a step this pass started may still be running (`drain` waits for it)."""
        return self._inflight.busy

    async def drain(self) -> None:
        """Wait until no step this pass started still runs, giving their branches a few
        turns to start their next ones; bounded by the pass's drain time (past it the
        steps are cut, to run again in a later pass). `resume` does this before it
        reports; a body may do it earlier, before it writes records of its own end."""
        await self._inflight.drain(self.workflow)

    async def transact(self, key: str, effect: object, parse: Parse[T] = _identity) -> T:
        """Run a store-specific ``effect`` and record its value in one commit, once.

        The effect's type is the checkpointer's (a cursor callback on SQL stores, a
        `LuaEffect` on Redis, a function over the dict on memory).
        """
        self._use(key)
        if key in self._records:
            self.replayed += 1
            return parse(self._records[key])
        self._inflight.hold(key)
        try:
            recorded = await self._write(self._checkpointer.transact(self._holder, key, effect))
            landed = self._land(key, recorded)
        finally:
            self._inflight.give_back(key)
        if recorded.first:
            self.performed += 1
        return parse(landed)

    async def sleep(self, key: str, duration: float) -> None:
        """Sleep ``duration`` seconds of the caller's clock without holding a process.

        The deadline is recorded on the first pass; until it passes, the pass ends with
        `Sleeping`.
        """
        seconds = positive(duration, "duration")
        await self._sleep_to(key, self._clock.now() + seconds)

    async def sleep_until(self, key: str, deadline: float) -> None:
        """Sleep until ``deadline`` (the caller's clock) without holding a process.

        The deadline is recorded on the first pass, one already past too (so every pass
        agrees it is over); until it passes, the pass ends with `Sleeping`. Raises
        `InvalidInputError` for a deadline that is not a finite number.
        """
        if (
            isinstance(deadline, bool)
            or not isinstance(deadline, int | float)
            or not math.isfinite(deadline)
        ):
            raise InvalidInputError(f"deadline must be a finite number, got {deadline!r}")
        await self._sleep_to(key, float(deadline))

    async def _sleep_to(self, key: str, deadline: float) -> None:
        self._use(key)
        if key in self._records:
            wakeups = self._wakeup(key)
        else:
            wakeups = []

            def landed(recorded: Recorded[object]) -> None:
                self._land(key, recorded)
                wakeups.extend(self._wakeup(key))

            # The wakeup is noted as the deadline lands, also when a sibling's suspension
            # cancels this sleep meanwhile: the pass must still be woken at the deadline.
            self._inflight.hold(key)
            try:
                await self._write(self._checkpointer.record(self._holder, key, deadline), landed)
            finally:
                self._inflight.give_back(key)
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
            self._inflight.hold(key)
            try:
                recorded = await self._write(self._checkpointer.record(self._holder, key, fresh))
                keys = [str(k) for k in cast(list[object], self._land(key, recorded))]
            finally:
                self._inflight.give_back(key)
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
        if self._closed:
            raise PassEnded(self.workflow, key)
        self._used.add(key)

    async def _close(self, ended_by: BaseException | None) -> None:
        """The body ended (``ended_by`` what it raised): let the steps its branches still
        run land, or cut them when the pass stops (cancelled, superseded); then refuse
        every further step."""
        try:
            if ended_by is not None and _stops(ended_by):
                await self._inflight.abort()
            else:
                await self._inflight.drain(self.workflow)
        finally:
            self._closed = True

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
                self._inflight.stopped = True  # superseded: what else runs is wasted
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
    drain: float = DRAIN_SECONDS,
) -> Outcome[T]:
    """Run one pass of ``body`` under ``holder`` and say how it ended.

    Returns `Completed`, `Sleeping` (the earliest deadline when several) or `Blocked`.
    Raises `Fenced`/`Contended` bare (also from inside task groups, and `Fenced` also when
    the body absorbed it and carried on), the body's own
    exception when it failed (a failure beats a suspension), and `Swallowed` when the body
    caught a suspension and returned.

    The pass reports only once no step it started still runs: when the body ends, the
    steps its branches still run (a bare ``asyncio.gather`` leaves them running when one
    branch suspends) land first, their branches going on until they finish or suspend
    too (their suspensions join the outcome), for up to ``drain`` seconds; past that they
    are cut, to run again in a later pass. Then any further step is refused (`PassEnded`).

    Cancelling the caller stops the pass: the steps still running are cut (a record being
    written still lands), and the cancellation propagates.
    """
    records = await checkpointer.load(holder.workflow)
    run = Execution(holder, checkpointer, records, clock or SystemClock(), drain=drain)
    if on_run is not None:
        on_run(run)
    try:
        value = await body(run)
    except BaseException as exc:
        if run.busy:
            await run._close(exc)
        run._closed = True
        suspended = _ended_by(run, exc)
        await _compact(run)
        return suspended
    # Suspensions noted from here on are of branches that outlived a body that returned:
    # its value stands.
    swallowed = run.suspensions
    if run.busy:
        await run._close(None)
    run._closed = True
    if run._fenced is not None:
        raise run._fenced
    if swallowed:
        raise Swallowed(holder.workflow, swallowed)
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


def _stops(exc: BaseException) -> bool:
    """Whether a body that ended with ``exc`` stops its pass (cancelled, superseded,
    interrupted): then the steps its branches still run are cut, not waited for."""
    return any(
        isinstance(leaf, Fenced | Contended) or not isinstance(leaf, Exception | Suspended)
        for leaf in _leaves(exc)
    )


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
        return await resume(holder, checkpointer, body, clock=clock, drain=budget)
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
