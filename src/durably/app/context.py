"""`Context`: what a workflow body is given as its first parameter. Every call it offers is
recorded under a key made of a name and its occurrence in the body, so each pass (a body is
re-run from the top) sees exactly what the first one saw."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_core import to_jsonable_python

from durably.app import records
from durably.app.topics import Topic
from durably.app.values import Duration, Value, digest, seconds_of, stored_text
from durably.errors import (
    IncompatibleRecordError,
    InvalidInputError,
    MessageNeeded,
    NondeterminismError,
    StepFailedError,
    StepResultError,
    WorkflowStopped,
)
from durably.runtime import Run
from durably.validation import identifier
from durably.workflows import is_inbox_key

if TYPE_CHECKING:
    from durably.app.steps import Step

T = TypeVar("T")

_workflow: contextvars.ContextVar[Context | None] = contextvars.ContextVar(
    "durably_workflow", default=None
)
_step: contextvars.ContextVar[StepContext | None] = contextvars.ContextVar(
    "durably_step", default=None
)


@dataclass(frozen=True, slots=True)
class StepContext:
    """What `durably.context()` gives inside a running step: enough to build an idempotency
    key for a call to an outside API (``f"{workflow}/{step}"`` is the same on every retry)."""

    workflow: str
    step: str
    attempt: int
    tenant: str
    kind: str


def context() -> StepContext:
    """The running step's `StepContext`; `RuntimeError` outside a step."""
    current = _step.get()
    if current is None:
        raise RuntimeError("durably.context() is only available inside a running step")
    return current


def current_workflow() -> Context | None:
    """The workflow body this code runs in (outside a step), or None."""
    return _workflow.get()


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


class Context:
    """A workflow body's handle on the durable world: recorded steps, time, randomness,
    sleeps, messages and events. Built by the App for each pass; never constructed by hand.
    """

    def __init__(self, run: Run, start: Mapping[str, Any], kind: str) -> None:
        self._run = run
        self._start = start
        self._kind = kind
        self._counts: dict[str, int] = {}
        self._consumed: set[str] = set()
        recorded = run.recorded
        # Records not yet met in this pass: while any remain, the body is replaying.
        self._unmet = {key for key in recorded if not records.bookkeeping(key)}
        self._cancel_key = records.cancel_key(records.generation(recorded))
        self._stopped: WorkflowStopped | None = None
        self._cancel_delivered = False
        self.logger: logging.LoggerAdapter[logging.Logger] = _ReplayQuiet(
            logging.getLogger(f"durably.workflow.{kind}"), self
        )
        """A logger that stays quiet while the body replays recorded work."""

    # --- who we are -----------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The workflow's id."""
        return self._run.workflow

    @property
    def kind(self) -> str:
        """The workflow's kind (its registered name)."""
        return self._kind

    @property
    def tenant(self) -> str:
        """The tenant the workflow was started for."""
        return str(self._start.get("tenant", "default"))

    @property
    def parent(self) -> str | None:
        """The parent workflow's id, for a child."""
        parent = self._start.get("parent")
        return None if parent is None else str(parent)

    @property
    def replaying(self) -> bool:
        """Whether the body is still re-running work an earlier pass recorded."""
        return bool(self._unmet)

    # --- recorded calls ---------------------------------------------------------------------

    def now(self) -> Awaitable[datetime]:
        """The current time (UTC), recorded: every pass sees the first pass's reading."""
        key = self._next(f"{records.PREFIX}now")
        clock = self._run.clock

        async def read() -> datetime:
            stamp = await self._record(key, clock.now)
            return datetime.fromtimestamp(float(stamp), UTC)  # type: ignore[arg-type]

        return read()

    def uuid(self) -> Awaitable[uuid.UUID]:
        """A fresh random UUID, recorded: every pass sees the same one."""
        key = self._next(f"{records.PREFIX}uuid")

        async def make() -> uuid.UUID:
            return uuid.UUID(str(await self._record(key, lambda: str(uuid.uuid4()))))

        return make()

    async def sleep(self, duration: Duration) -> None:
        """Sleep ``duration`` (seconds or a timedelta) without holding a worker: the pass
        ends and the workflow is woken at the deadline recorded by the first pass."""
        seconds = seconds_of(duration, "duration")
        key = self._next(f"{records.PREFIX}sleep")
        self._meet(key)
        self._deliver_cancel()
        await self._run.sleep(key, seconds)

    async def step(self, key: str, fn: Callable[[], Awaitable[T] | T]) -> T:
        """Run ``fn`` once across every pass under the explicit ``key`` (the engine's form;
        the value must be plain JSON) and return its recorded value."""
        records.user_key(identifier(key, "step key"), "step key")
        self._meet(key)
        self._deliver_cancel()
        return await self._run.step(key, fn)

    async def transact(
        self, key: str, effect: object, parse: Callable[[object], T] | None = None
    ) -> T:
        """Run a store-specific ``effect`` and record its value in one commit, once
        (`durably.Run.transact`: SQL backings and Redis Lua effects)."""
        records.user_key(identifier(key, "step key"), "step key")
        self._meet(key)
        self._deliver_cancel()
        if parse is None:
            return await self._run.transact(key, effect)
        return await self._run.transact(key, effect, parse)

    def patched(self, change: str) -> Awaitable[bool]:
        """Whether this workflow runs the code after change ``change`` at this point: True
        for a workflow that reaches it fresh, False for one whose earlier passes already
        went past it on the old code. Recorded, so the answer never changes."""
        key = f"{records.PREFIX}patched:{identifier(change, 'change id')}"
        fresh = not self.replaying

        async def answer() -> bool:
            return bool(await self._record(key, lambda: fresh))

        return answer()

    async def set_event(self, key: str, value: object) -> None:
        """Publish ``value`` (JSON-encodable) as the latest value of event ``key``; read it
        with `WorkflowHandle.get_event`. Recorded."""
        identifier(key, "event key")
        try:
            data = to_jsonable_python(value)
        except Exception as exc:
            raise InvalidInputError(f"event {key!r}: cannot encode {value!r}: {exc}") from None
        name = records.event_key(key, self._count(f"{records.EVENT}{key}"))
        self._meet(name)
        await self._run.step(name, lambda: data)

    async def recv(self, topic: Topic[T], timeout: Duration | None = None) -> T | None:
        """The next message sent to this workflow on ``topic``, or None once ``timeout``
        has passed without one. The pass ends while waiting (no worker is held); what was
        consumed (or that it timed out) is recorded, so a message arriving after the
        timeout is kept for the next `recv`."""
        seconds = None if timeout is None else seconds_of(timeout, "timeout")
        key = self._next(f"{records.PREFIX}recv:{topic.name}")
        self._meet(key)
        self._deliver_cancel()
        recorded = self._run.recorded
        if key not in recorded:
            chosen = self._next_message(topic)
            if chosen is None:
                if seconds is None:
                    raise MessageNeeded(key)
                deadline = f"{key}:deadline"
                self._meet(deadline)
                await self._run.sleep(deadline, seconds)
            outcome: dict[str, object] = {"t": True} if chosen is None else {"m": chosen}
            taken: object = await self._run.step(key, lambda: outcome)
        else:
            taken = await self._run.step(key, lambda: None)
        if not isinstance(taken, dict) or "m" not in taken:
            return None
        message_key = str(taken["m"])
        self._consumed.add(message_key)
        message = recorded.get(message_key)
        data = message.get("value") if isinstance(message, dict) else None
        return self._decode(topic.value, data, message_key)  # type: ignore[no-any-return]

    # --- steps (called by `Step.__call__`) -----------------------------------------------

    def _call_key(self, name: str) -> str:
        return self._next(name)

    async def _call_step(
        self, step: Step[..., Any], key: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        arguments = step.signature.encode_args(args, kwargs)
        marker = digest(arguments)
        self._meet(key)
        self._deliver_cancel()
        failure: list[BaseException] = []

        async def effect() -> object:
            try:
                value = await self._attempts(step, key, args, kwargs)
            except Exception as exc:
                failure.append(exc)
                return {"a": marker, "e": [type(exc).__name__, str(exc)]}
            try:
                encoded = step.signature.result.encode(value)
            except Exception as exc:
                error = StepResultError(f"step {key!r} returned a value it cannot encode: {exc}")
                failure.append(error)
                return {"a": marker, "e": ["StepResultError", str(error)]}
            return {"a": marker, "v": encoded}

        def parse(stored: object) -> Any:
            return self._parse_step(step, key, marker, stored)

        try:
            return await self._run.step(key, effect, parse)
        except StepFailedError as exc:
            if failure:
                raise exc from failure[0]
            raise

    async def _attempts(
        self, step: Step[..., Any], key: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        attempt = 1
        while True:
            info = StepContext(self.id, key, attempt, self.tenant, self.kind)
            try:
                return await step.invoke(args, kwargs, info)
            except Exception as exc:
                if not step.retry.retries(exc, attempt):
                    raise
                self.logger.warning("step %r attempt %d failed: %r; retrying", key, attempt, exc)
                await asyncio.sleep(step.retry.backoff(attempt))
                attempt += 1

    def _parse_step(self, step: Step[..., Any], key: str, marker: str, stored: object) -> Any:
        if not isinstance(stored, dict) or "a" not in stored:
            raise self._park(
                NondeterminismError(
                    self.id, key, f"the record there was not written by step {step.name!r}"
                )
            )
        if stored["a"] != marker:
            raise self._park(
                NondeterminismError(
                    self.id,
                    key,
                    f"step {step.name!r} was called with other arguments than the recorded "
                    "call (the body changed, or concurrent calls need .keyed(key))",
                )
            )
        if "e" in stored:
            error_type, message = stored["e"]
            raise StepFailedError(self.id, key, str(error_type), str(message))
        return self._decode(step.signature.result, stored.get("v"), key)

    # --- internals -----------------------------------------------------------------------

    def _count(self, name: str) -> int:
        count = self._counts.get(name, 0) + 1
        self._counts[name] = count
        return count

    def _next(self, name: str) -> str:
        return records.occurrence(name, self._count(name))

    def _meet(self, key: str) -> None:
        self._unmet.discard(key)

    async def _record(self, key: str, make: Callable[[], object]) -> object:
        self._meet(key)
        return await self._run.step(key, make)

    def _next_message(self, topic: Topic[Any]) -> str | None:
        for key, value in self._run.recorded.items():
            if (
                is_inbox_key(key)
                and key not in self._consumed
                and isinstance(value, dict)
                and value.get("topic") == topic.name
            ):
                self._consumed.add(key)
                return key
        return None

    def _decode(self, value: Value, data: object, key: str) -> Any:
        try:
            return value.decode(data)
        except ValueError as exc:
            raise self._park(
                IncompatibleRecordError(self.id, key, value.type_name, stored_text(data), str(exc))
            ) from None

    def _park(self, error: WorkflowStopped) -> WorkflowStopped:
        # Kept so the pass parks even if the body catches the error.
        if self._stopped is None:
            self._stopped = error
        return error

    def _deliver_cancel(self) -> None:
        if not self._cancel_delivered and self._cancel_key in self._run.recorded:
            self._cancel_delivered = True
            raise asyncio.CancelledError(f"workflow {self.id!r} was cancelled")


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is an ``async def`` function."""
    return inspect.iscoroutinefunction(fn)


def bind_workflow(ctx: Context | None) -> contextvars.Token[Context | None]:
    """Make ``ctx`` the current workflow of this task (None inside a step)."""
    return _workflow.set(ctx)


def unbind_workflow(token: contextvars.Token[Context | None]) -> None:
    """Undo `bind_workflow`."""
    _workflow.reset(token)


def bind_step(info: StepContext | None) -> contextvars.Token[StepContext | None]:
    """Make ``info`` what `context()` returns in this task."""
    return _step.set(info)


def unbind_step(token: contextvars.Token[StepContext | None]) -> None:
    """Undo `bind_step`."""
    _step.reset(token)


__all__ = [
    "Context",
    "StepContext",
    "bind_step",
    "bind_workflow",
    "context",
    "current_workflow",
    "is_async",
    "unbind_step",
    "unbind_workflow",
]
