"""Pacing the record writes of workflow passes: a few in flight at once per process, and a
write that met a busy pool tried again instead of failing a pass whose effect already ran.

A body may gather thousands of steps. Unpaced, every one of them asks the pool for a
connection at the same moment: the pool's wait runs out for the last ones, the claim's
renewal queues behind them, and each write that gives up fails the pass after its effect
ran, so the next pass runs that effect again. `PacedDurable` (what `Stores.durable` hands
out) lets the writes of every pass of one process through a `WriteGate` of fewer slots
than the pool has connections: the rest queue in the process, and the pool keeps
connections free for renewals, status reports and handles.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, cast

from durably.errors import PoolExhaustedError
from durably.stores.backoff import pause_seconds
from durably.stores.workflows import Checkpointer, Durable, Entry, Pass, Recorded, Scheduler
from durably.validation import positive, positive_int

EffectT = TypeVar("EffectT")
R = TypeVar("R")

FIRST_PAUSE = 0.05
"""Seconds before a write that met an exhausted pool is tried again; doubles per try."""
LONGEST_PAUSE = 1.0
"""The longest pause between two tries of one write."""


class WriteGate:
    """At most ``slots`` writes in flight at once; a write that finds the pool exhausted
    (`PoolExhaustedError`) is tried again, holding its slot, for up to ``patience``
    seconds from its first refusal, then raises it.

    Retrying is safe: a refused write never reached the store (no connection was had), and
    a record is first-writer-wins, so a retry can only land the value once.
    """

    def __init__(self, slots: int) -> None:
        self.slots = positive_int(slots, "slots")
        self._slots = asyncio.Semaphore(self.slots)

    async def write(self, patience: float, write: Callable[..., Awaitable[R]], *args: object) -> R:
        """``await write(*args)`` in a slot, tried again while the pool is exhausted."""
        async with self._slots:
            deadline: float | None = None
            attempt = 0
            while True:
                try:
                    return await write(*args)
                except PoolExhaustedError:
                    # The slow path: the pool was busy even after its own wait.
                    now = asyncio.get_running_loop().time()
                    if deadline is None:
                        deadline = now + patience
                    attempt += 1
                    pause = pause_seconds(FIRST_PAUSE, attempt, random.random, LONGEST_PAUSE)
                    if now + pause > deadline:
                        raise
                await asyncio.sleep(pause)


class PacedCheckpointer(Generic[EffectT]):
    """A `Checkpointer` whose ``record`` and ``transact`` pass through a `WriteGate`;
    everything else is the wrapped checkpointer's own."""

    def __init__(self, inner: Checkpointer[EffectT], gate: WriteGate, patience: float) -> None:
        self._inner = inner
        self._gate = gate
        self._patience = positive(patience, "patience")

    @property
    def inner(self) -> Checkpointer[EffectT]:
        """The wrapped checkpointer."""
        return self._inner

    async def record(self, holder: Pass, key: str, value: object) -> Recorded[object]:
        return await self._gate.write(self._patience, self._inner.record, holder, key, value)

    async def transact(self, holder: Pass, key: str, effect: EffectT) -> Recorded[object]:
        return await self._gate.write(self._patience, self._inner.transact, holder, key, effect)

    def __getattr__(self, name: str) -> Any:
        # Claims, loads, statuses and the rest: one pass each, not paced.
        return getattr(self._inner, name)


class PacedDurable(Generic[EffectT]):
    """A `Durable` whose ``checkpointer`` is a `PacedCheckpointer` over the wrapped one's
    (the writes of passes); ``arrive``, ``deliver`` and ``delete`` are its own."""

    def __init__(self, inner: Durable[EffectT], gate: WriteGate, patience: float) -> None:
        self._inner = inner
        self._checkpointer = cast(
            Checkpointer[EffectT], PacedCheckpointer(inner.checkpointer, gate, patience)
        )

    @property
    def inner(self) -> Durable[EffectT]:
        """The wrapped durable."""
        return self._inner

    @property
    def checkpointer(self) -> Checkpointer[EffectT]:
        return self._checkpointer

    @property
    def scheduler(self) -> Scheduler:
        return self._inner.scheduler

    async def arrive(
        self,
        workflow: str,
        key: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
    ) -> Recorded[object]:
        return await self._inner.arrive(workflow, key, value, tenant=tenant, priority=priority)

    async def deliver(
        self,
        workflow: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
        unless_finished: bool = False,
    ) -> Entry:
        return await self._inner.deliver(
            workflow, value, tenant=tenant, priority=priority, unless_finished=unless_finished
        )

    async def delete(self, workflow: str) -> int:
        return await self._inner.delete(workflow)

    async def close(self) -> None:
        await self._inner.close()


__all__ = ["FIRST_PAUSE", "LONGEST_PAUSE", "PacedCheckpointer", "PacedDurable", "WriteGate"]
