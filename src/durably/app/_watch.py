"""What a step tells traces and metrics: a span per step call (performed or replayed, its
attempts and outcome) and the duration of a performed step's attempts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from durably.errors import Suspended
from durably.otel import instruments
from durably.otel.api import tracing_on, watching
from durably.otel.tracing import Consuming, Stepping

if TYPE_CHECKING:
    from durably.app._context import Context

T = TypeVar("T")


class StepWatch:
    """Follows one performed step: its span, current while it runs, and its duration."""

    __slots__ = ("_ctx", "_ended", "_name", "_outcome", "_span", "_started", "_token")

    def __init__(self, ctx: Context, name: str, key: str, operation: str = "step") -> None:
        self._ctx = ctx
        self._name = name
        self._started = time.perf_counter()
        self._outcome: str | None = None
        self._ended = False
        self._span: Stepping | None = None
        self._token: object | None = None
        if tracing_on():
            self._span = Stepping(
                operation, name, key, ctx.id, ctx.kind, ctx.tenant, replayed=False
            )
            self._token = self._span.attach()

    @staticmethod
    def wanted() -> bool:
        """Whether steps are traced or measured at all."""
        return watching()

    def performed(self, attempts: int, failure: BaseException | None) -> None:
        """Note that the step's attempts ended (``failure``: its last error)."""
        self._outcome = "ok" if failure is None else "failed"
        if self._span is not None:
            self._span.attempt = attempts
        self._timed(self._outcome)

    def _timed(self, outcome: str) -> None:
        elapsed = time.perf_counter() - self._started
        instruments.step_timed(self._ctx.kind, self._name, self._ctx.tenant, outcome, elapsed)

    def end(self, error: BaseException | None) -> None:
        """End the span, once: ``error`` is what the step call raised (None: it returned)."""
        if self._ended:
            return
        self._ended = True
        if self._outcome is None:
            # Cut before its attempts ended: cancelled, or waiting out a long backoff.
            self._outcome = _cut(error)
            if self._outcome == "failed":
                self._timed(self._outcome)
        if self._span is None:
            return
        if self._token is not None:
            Consuming.detach(self._token)
        failed = error is not None and self._outcome in ("failed", "error")
        self._span.end(self._outcome, error if failed else None)


def _cut(error: BaseException | None) -> str:
    if error is None:
        return "ok"
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    if isinstance(error, Suspended | BaseExceptionGroup):
        return "suspended"
    return "failed"


def replayed(ctx: Context, name: str, key: str, answer: Callable[[], T]) -> T:
    """``answer()`` (a recorded step's value, or what its record raises) under a span that
    says the step was replayed.
    """
    span = Stepping("step", name, key, ctx.id, ctx.kind, ctx.tenant, replayed=True)
    try:
        value = answer()
    except BaseException as exc:
        span.end("failed", exc)
        raise
    span.end("ok")
    return value


async def watched(ctx: Context, operation: str, key: str, call: Callable[[], Awaitable[T]]) -> T:
    """``await call()``, an inline step or ``transact`` at ``key``, traced and timed (only
    called when `StepWatch.wanted`).
    """
    if key in ctx._records:
        if not tracing_on():
            return await call()
        span = Stepping(operation, key, key, ctx.id, ctx.kind, ctx.tenant, replayed=True)
        try:
            value = await call()
        except BaseException as exc:
            span.end(_cut(exc), exc)
            raise
        span.end("ok")
        return value
    watch = StepWatch(ctx, key, key, operation)
    try:
        value = await call()
    except BaseException as exc:
        watch.end(exc)
        raise
    watch.performed(1, None)
    watch.end(None)
    return value


__all__ = ["StepWatch", "replayed", "watched"]
