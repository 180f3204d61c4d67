"""The steps a pass has started and not yet recorded, so that a pass never ends while one
of them runs.

A body may run steps in several branches (``asyncio.gather``, a task group, tasks of its
own). When one branch suspends, a bare ``asyncio.gather`` raises at once and leaves the
others running: were the pass to report then, a step still running would be an orphan,
its claim released, and the next pass would run it again. So the pass first waits for
the steps in flight to land (bounded), lets their branches go on until they finish or
suspend too, and only then reports; after that no branch may start a step.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

_logger = logging.getLogger("durably.engine")

DRAIN_SECONDS = 300.0
"""How long, by default, a pass whose body has ended waits for the steps its branches still
run (the Worker gives a pass its whole budget: a step beside a suspension gets the time it
would have had awaited on its own). Past it they are cut, as a worker's shutdown cuts them."""
ABORT_SECONDS = 5.0
"""How long a pass that stops (cancelled, superseded, out of time) waits for the steps it
cut to unwind: a record being written when the cut came still lands."""
SETTLE_TURNS = 3
"""Turns of the event loop a draining pass gives its branches once no step runs: a branch
whose step just landed goes on to start its next one within them (unless it first awaits
something else, when its next step is refused and waits for the next pass)."""


class InFlight:
    """The running steps of one pass, each under its key with the task that runs it.

    Built in the pass's own task (the body's main line; the tasks it starts are its
    branches), whose cancellation is the pass's stop: the worker's shutdown, a lost
    claim."""

    def __init__(self, drain_seconds: float) -> None:
        self._drain_seconds = drain_seconds
        self._owner = asyncio.current_task()
        self._running: dict[str, asyncio.Task[Any] | None] = {}
        self._changed: asyncio.Future[None] | None = None
        self.stopped = False
        """Set once the pass stops on its own (superseded, or out of drain time)."""

    @property
    def busy(self) -> bool:
        """Whether any step is noted as running (its task may have ended: see `drain`)."""
        return bool(self._running)

    def take(self, key: str, task: asyncio.Task[Any] | None = None) -> asyncio.Task[Any] | None:
        """Note that the step at ``key`` starts in ``task`` (default: the current one),
        and return that task. Its caller gives it back when it ends (commit, abandon)."""
        if task is None:
            task = asyncio.current_task()
        self._running[key] = task
        return task

    def hold(self, key: str) -> None:
        """Note that the step at ``key`` starts, for a caller that gives it back in a
        ``finally`` of its own (it cannot leak, so its task is not looked up: it is
        waited for, never cut)."""
        self._running[key] = None

    def give_back(self, key: str) -> None:
        """Note that the step at ``key`` ended (recorded, failed or cut); safe to repeat."""
        if self._running.pop(key, _ABSENT) is not _ABSENT:
            changed = self._changed
            if changed is not None and not changed.done():
                changed.set_result(None)

    @property
    def stopping(self) -> bool:
        """Whether the pass stops (`stopped`, or its own task being cancelled): what runs
        is cut rather than waited for."""
        owner = self._owner
        return self.stopped or (owner is not None and owner.cancelling() > 0)

    def in_branch(self, task: asyncio.Task[Any] | None) -> bool:
        """Whether ``task`` is a branch of the body rather than the pass's own task."""
        return task is not self._owner

    async def guard(self, work: Awaitable[T]) -> T:
        """Await ``work`` (the rest of a step a branch started: its effect and its record)
        in a task of its own, to its end even if the branch is cancelled meanwhile.

        A cancel from inside the body (a sibling's failure in ``ctx.gather``, a task group
        aborting on a suspension) reaches the branch only once the step's record landed,
        so an effect that began is never cut and paid again by a later pass. A stop of the
        whole pass (`stopping` as the cancel came) cuts it."""
        inner = asyncio.ensure_future(work)
        held = False
        while not inner.done():
            watch = _Watch(self)
            inner.add_done_callback(watch.settle)
            try:
                await watch
            except asyncio.CancelledError:
                inner.remove_done_callback(watch.settle)
                if watch.stops:
                    inner.cancel()
                    await asyncio.wait({inner}, timeout=ABORT_SECONDS)
                    if inner.done() and not inner.cancelled():
                        inner.exception()  # retrieved: the cut is what propagates
                    raise
                held = True
        if held:
            if not inner.cancelled():
                inner.exception()  # its failure is recorded, its suspension noted: the
            raise asyncio.CancelledError  # cancel asked for is what the branch sees
        return inner.result()

    def running(self) -> set[asyncio.Task[Any]]:
        """The tasks known to run a step now, other than the current one (a step `hold`
        noted has none)."""
        me = asyncio.current_task()
        return {
            task
            for task in self._running.values()
            if task is not None and task is not me and not task.done()
        }

    async def drain(self, workflow: str) -> None:
        """Wait until no step runs (bounded by the drain time, then cut), giving their
        branches `SETTLE_TURNS` turns after each lull to start their next step. Keys whose
        task ended or is the current one are not waited for: a count that leaked (a
        caller that never gave its key back) cannot hold the pass."""
        if not self._running:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._drain_seconds
        quiet = 0
        try:
            while quiet < SETTLE_TURNS:
                if self.stopping:
                    await self.abort()
                    return
                live = self.running()
                if not live and None not in self._running.values():
                    quiet += 1
                    await asyncio.sleep(0)
                    continue
                quiet = 0
                remaining = deadline - loop.time()
                if remaining <= 0:
                    _logger.warning(
                        "workflow %r: %d step(s) still running %.0fs after the body ended; "
                        "cut, to run again in a later pass",
                        workflow,
                        len(live),
                        self._drain_seconds,
                        extra={"workflow": workflow},
                    )
                    await self.abort()
                    return
                changed = self._changed = loop.create_future()
                try:
                    await asyncio.wait(
                        {changed, *live}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    self._changed = None
                    changed.cancel()
        except asyncio.CancelledError:
            await self.abort()
            raise

    async def abort(self) -> None:
        """Stop: cut every step still running and wait (`ABORT_SECONDS` at most) for them
        to unwind."""
        self.stopped = True
        live = self.running()
        for task in live:
            task.cancel()
        if live:
            await asyncio.wait(live, timeout=ABORT_SECONDS)


_ABSENT = object()


class _Watch(asyncio.Future[None]):
    """What a guarded branch awaits: done when its step's task ends. A cancel of the
    branch notes, as it comes, whether it stops the pass: a task group cancels its tasks
    before it cancels the task it runs in, and a stop of the pass cancels the pass's own
    task before its branches, so the order tells the two apart."""

    def __init__(self, inflight: InFlight) -> None:
        super().__init__()
        self._inflight = inflight
        self.stops = False

    def settle(self, _: asyncio.Future[Any]) -> None:
        if not self.done():
            self.set_result(None)

    def cancel(self, msg: Any | None = None) -> bool:
        self.stops = self.stops or self._inflight.stopping
        return super().cancel(msg=msg)


__all__ = ["ABORT_SECONDS", "DRAIN_SECONDS", "SETTLE_TURNS", "InFlight"]
