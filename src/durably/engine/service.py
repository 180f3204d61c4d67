"""What every service a `Worker` runs shares: the claim loop with a concurrency limit, the
context a worker hands its services, and how log lines show instants.

Waiting (polls, heartbeats, grace) is in real seconds on the event loop; every timestamp
the worker hands a store (backoff deadlines, `wake_due`) comes from the injected `Clock`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from durably.clock import Clock
from durably.errors import (
    ConfigurationError,
    DurablyError,
)
from durably.stores.backoff import Jitter
from durably.validation import positive_int


@dataclass(slots=True)
class ServiceContext:
    """What every service shares with the worker that runs it."""

    worker: str
    clock: Clock
    logger: logging.Logger
    poll_seconds: float
    stopping: asyncio.Event
    note_due: Callable[[float], None]
    fatal: Callable[[BaseException], None]
    jitter: Jitter = random.random
    """Where the worker's waits draw their jitter (a float in [0, 1) per call)."""


def retryable(exc: BaseException) -> bool:
    """Whether a failure may go away on its own: a durably error says so, anything else may."""
    return bool(exc.retryable) if isinstance(exc, DurablyError) else True


class Instant:
    """An instant in seconds since the epoch, shown in log lines as UTC ISO 8601 (built
    only when a line is written)."""

    __slots__ = ("epoch",)

    def __init__(self, epoch: float) -> None:
        self.epoch = epoch

    def __str__(self) -> str:
        return datetime.fromtimestamp(self.epoch, UTC).isoformat(timespec="milliseconds")


class Service:
    """A claim loop with a concurrency limit: claims only while a slot is free."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = positive_int(concurrency, "concurrency")
        self.inflight: set[asyncio.Task[None]] = set()
        self.peak = 0
        # Set when a slot frees up or the worker stops: the claim loop waits on it.
        self._nudge = asyncio.Event()

    def reset(self) -> None:
        """Forget the last run's wake-ups (before serving again)."""
        self._nudge = asyncio.Event()

    def nudge(self) -> None:
        """Wake the claim loop (a slot freed, or the worker is stopping)."""
        self._nudge.set()

    def start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` in a slot; the slot frees itself when it ends."""
        task = asyncio.create_task(work)
        self.inflight.add(task)
        self.peak = max(self.peak, len(self.inflight))
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.inflight.discard(task)
        self._nudge.set()

    async def serve(self, ctx: ServiceContext) -> None:
        """Claim and start work until the worker stops; store errors are logged and waited out."""
        while not ctx.stopping.is_set():
            self._nudge.clear()
            if len(self.inflight) >= self.concurrency:
                await self._nudge.wait()  # backpressure: no claim without a free slot
                continue
            try:
                if not await self.claim_one(ctx):
                    await self.idle(ctx)  # a waiting claim fails here like any other
            except ConfigurationError as exc:
                ctx.fatal(exc)
                return
            except Exception:
                ctx.logger.exception("claiming failed; retrying", extra=self.fields(ctx))
                await self._rest(ctx.poll_seconds)

    async def claim_one(self, ctx: ServiceContext) -> bool:
        """Claim one unit of work and start it; False if there was none."""
        raise NotImplementedError

    async def idle(self, ctx: ServiceContext) -> None:
        """Wait for work after finding none."""
        await self._rest(ctx.poll_seconds)

    def fields(self, ctx: ServiceContext) -> dict[str, object]:
        """The structured-logging fields naming this service."""
        return {"worker": ctx.worker}

    async def _rest(self, seconds: float, also: Awaitable[object] | None = None) -> None:
        """Wait ``seconds`` or until nudged (or until ``also`` finishes)."""
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(self._nudge.wait())]
        if also is not None:
            waits.append(asyncio.ensure_future(also))
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            await asyncio.gather(*waits, return_exceptions=True)


__all__ = ["Instant", "Service", "ServiceContext", "retryable"]
