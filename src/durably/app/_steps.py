"""`Step`: a function whose result a workflow records, registered with ``@app.step``."""

from __future__ import annotations

import asyncio
import functools
import typing
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, ParamSpec, TypeVar

from durably.app._context import Attempt, Context, bind, current_workflow, is_async, unbind
from durably.app._layout import KEYED_BYTES, bounded, user_key
from durably.app._recording import recorded_call
from durably.app._retry import ONCE, Retry
from durably.app._values import Signature
from durably.engine.tasks import cancel_requested
from durably.errors import ConfigurationError, StepTimeoutError, StrayCancellationError
from durably.validation import identifier

P = ParamSpec("P")
R = TypeVar("R")


class Step(Generic[P, R]):
    """A registered step: what `App.step` makes of a function.

    Awaited inside a workflow body, its result is recorded under the step's name and the
    call's occurrence (checked against the arguments on replay); awaited elsewhere, it
    simply runs the function (a plain ``def`` in a thread).
    """

    def __init__(
        self,
        fn: Callable[P, Awaitable[R]] | Callable[P, R],
        *,
        name: str,
        retry: Retry | None,
        timeout: float | None,
        key: str | None = None,
        signature: Signature | None = None,
    ) -> None:
        self.fn = fn
        self.name = user_key(bounded(name, "step name"), "step name")
        if "#" in self.name:  # "s#1:retry" would name step "s"'s first retry deadline
            raise ConfigurationError(
                f"step name {name!r}: '#' is reserved (it numbers a step's calls in its keys)"
            )
        self.retry = retry if retry is not None else ONCE
        self.timeout = timeout
        if signature is None:
            _refuse_context(fn, f"step {name!r}")
            signature = Signature(fn, f"step {name!r}")
        self.signature = signature
        self._key = key
        self._async = is_async(fn)
        self.direct = self._async and timeout is None
        """Whether an attempt is just an await of the function (no thread, no timeout):
        the first attempt of a fresh call then runs inline (`recorded_call`)."""
        functools.update_wrapper(self, fn)

    def keyed(self, key: str) -> Step[P, R]:
        """Return this step recorded under an explicit key instead of its occurrence.

        For calls whose order may vary between passes, such as fan-out in concurrent
        branches (``asyncio.gather``): each call's record is found by its key, in any order.

        Args:
            key: The call's key, one per call of this step in a workflow.

        Returns:
            The same step, recording under ``name[key]``.

        Raises:
            InvalidInputError: A ``key`` that is not a usable id, or that makes
                ``name[key]`` longer than 480 bytes.
        """
        identifier(key, "step key")
        keyed = bounded(f"{self.name}[{key}]", f"step {self.name!r}: key", KEYED_BYTES)
        return Step(
            self.fn,
            name=self.name,
            retry=self.retry,
            timeout=self.timeout,
            key=keyed,
            signature=self.signature,  # its adapters, built once at decoration
        )

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        """Call the step: recorded inside a workflow body, the plain function elsewhere.

        Outside a workflow body it raises whatever the function raises.

        Args:
            *args: The function's arguments.
            **kwargs: The function's keyword arguments.

        Returns:
            A coroutine of the function's result (on a replay, the recorded one). Inside
            a workflow the call takes its key at once: a call never awaited still takes
            its occurrence, and Python's warning of it names the key (``summarise#1``).

        Raises:
            StepFailedError: The step failed for good: its retries ran out, or it raised a
                non-retryable error or returned a value its annotation cannot encode. A
                replay raises the same; the first pass chains the original error.
            StepResultError: The result is too large for the store to record (its effect
                has run).
            InvalidInputError: Arguments that do not fit the parameters or annotations.
            NondeterminismError: A replay's call at this key has other arguments than the
                recorded call; the workflow parks.
            IncompatibleRecordError: The recorded result no longer fits the annotated
                type; the workflow parks.
        """
        ctx = current_workflow()
        if ctx is None:
            plain = self._plain(args, kwargs)
            plain.__qualname__ = self.name  # type: ignore[attr-defined]
            return plain
        # The key is taken now, at the call, so concurrent branches keep their call order;
        # so is the position of a call the body's own task makes (`_drift`). A call with
        # an explicit key (`keyed`) is found by its key wherever it comes: it takes none.
        position = None
        if self._key is not None:
            key = self._key
        else:
            key = ctx._next(self.name)
            if asyncio.current_task() is ctx._task:
                position = ctx._made
                ctx._made = position + 1
        call = recorded_call(ctx, self, key, args, kwargs, position)
        # Python's warning for a call never awaited names this; the key says which call
        # took the occurrence (the step's later calls in the body get the next ones).
        call.__qualname__ = key  # type: ignore[attr-defined]
        return call

    async def _plain(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
        if self._async:
            return await self.fn(*args, **kwargs)  # type: ignore[no-any-return,misc]
        return await asyncio.to_thread(self.fn, *args, **kwargs)  # type: ignore[arg-type]

    async def invoke(self, args: tuple[Any, ...], kwargs: dict[str, Any], attempt: Attempt) -> R:
        """Run one attempt inside a workflow.

        `durably.context()` describes ``attempt``, further step calls inside run plainly,
        and ``timeout`` bounds the attempt (`StepTimeoutError`).
        """
        token = bind(attempt)
        try:
            if self.timeout is None:
                if self._async:
                    return await self.fn(*args, **kwargs)  # type: ignore[no-any-return,misc]
                return await self._plain(args, kwargs)
            try:
                return await asyncio.wait_for(self._plain(args, kwargs), self.timeout)
            except TimeoutError:
                ctx, key, number = attempt
                raise StepTimeoutError(
                    f"step {key!r} of workflow {ctx.id!r} timed out after "
                    f"{self.timeout}s (attempt {number})"
                ) from None
        except asyncio.CancelledError:
            if cancel_requested():
                raise
            # Nobody cancelled the step: a failed attempt, under its retry policy.
            raise StrayCancellationError(f"step {attempt[1]!r}") from None
        finally:
            unbind(token)

    def __repr__(self) -> str:
        return f"<durably step {self.name!r}>"


def _refuse_context(fn: Callable[..., Any], what: str) -> None:
    """`ConfigurationError` naming a parameter of ``fn`` annotated as the Context.

    A step is given its arguments alone; pydantic would refuse the Context's type at
    length.
    """
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return  # `Signature` says what it cannot resolve
    for parameter, hint in hints.items():
        if parameter != "return" and isinstance(hint, type) and issubclass(hint, Context):
            raise ConfigurationError(
                f"{what}: parameter {parameter!r} is a durably.Context, which only a workflow "
                "body takes (inside a step, durably.context() gives its workflow, key and "
                "attempt)"
            )


__all__ = ["Step"]
