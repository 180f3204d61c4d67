"""`Waiters`: every handle waiting in this process, woken by one subscription to the store.

A handle waiting for a result or an event registers here before it looks, then sleeps
until the store announces a change of its workflow (`durably.stores.changes`): one
subscription per App, whatever the number of waiters, fanned out to each waiter of the
workflow announced. A waiter wakes, looks once, and sleeps again; it costs the store
nothing while it sleeps.

Polling is the fallback: while the store's feed is down (its listening connection lost,
a store without announcements) a waiter looks on its own, quickly at first and then every
`FALLBACK_SECONDS`. When the feed may have missed announcements (on every connect, and
when another process wrote to a SQLite file) every waiter looks once.

The App is used from one event loop after another: the subscription follows the stores
of the running loop (`LoopStores`), and each waiter wakes on its own loop.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

from durably.stores.changes import ENDED, MISSED, ChangeFeed
from durably.stores.opening import Stores

FIRST_LOOK = 0.01
"""While polling: the first pause between looks (seconds), doubled after each look."""
FALLBACK_SECONDS = 1.0
"""While polling: the longest pause between a waiter's looks (seconds)."""
FRESH_KEPT = 10_000
"""The most workflows started here whose silence since is tracked (see `Waiters.starting`):
past it the oldest is forgotten, and its first wait looks as any other does."""

T = TypeVar("T")


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Waiter:
    """One handle's wait for ``workflow`` (a context manager: leaving it unregisters)."""

    def __init__(self, waiters: Waiters, workflow: str, what: str) -> None:
        self._waiters = waiters
        self.workflow = workflow
        self.what = what
        self._loop = asyncio.get_running_loop()
        self._woken = False
        self._future: asyncio.Future[None] | None = None
        self._look = FIRST_LOOK
        self._polled = False

    def look_again(self) -> None:
        """Make the next `pause` a poll's (a look that failed, with nothing announced)."""
        self._polled = True

    def wake(self) -> None:
        """Make the next (or current) `pause` return (from any thread or loop)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self._loop:
            if not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self.wake)
            return
        self._woken = True
        future = self._future
        if future is not None:
            _settle(future)

    async def pause(self, deadline: float | None) -> bool:
        """Sleep until the store announces a change of the workflow.

        While polling, until the next look instead. False, at once, when ``deadline``
        (loop time) has passed.
        """
        live = self._waiters.live and not self._polled
        self._polled = False
        wait = math.inf if live else self._look
        if deadline is not None:
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return False
            wait = min(wait, remaining)
        if not self._woken:
            # A future and a timer, not `asyncio.wait_for` (a task per wait): a thousand
            # waiters woken at once each cost one step of their own task.
            future = self._future = self._loop.create_future()
            timer = None if wait == math.inf else self._loop.call_later(wait, _settle, future)
            try:
                await future
            finally:
                self._future = None
                if timer is not None:
                    timer.cancel()
        self._woken = False
        self._look = FIRST_LOOK if live else min(self._look * 2, FALLBACK_SECONDS)
        return True

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._waiters.drop(self)


class _Look:
    """A read in flight, begun at announcement number ``started``, and who joined it."""

    __slots__ = ("joined", "loop", "started")

    def __init__(self, started: int, loop: asyncio.AbstractEventLoop) -> None:
        self.started = started
        self.loop = loop
        self.joined: list[asyncio.Future[Any]] = []


class Waiters:
    """The waiters of one App, keyed by workflow, behind one subscription (see module)."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[Waiter]] = {}
        self._over: Stores | None = None
        self._feed: ChangeFeed | None = None
        # Announcements are numbered: a shared look that began at number N has read
        # every change announced up to N.
        self._tick = 0
        self._announced: dict[str, int] = {}  # workflows waited for: their last number
        self._missed = 0  # the number of the last MISSED
        self._looks: dict[tuple[str, str], _Look] = {}
        self._fresh: dict[str, None] = {}  # started here, no end announced since

    @property
    def live(self) -> bool:
        """Whether announcements arrive now (else waiters poll)."""
        feed = self._feed
        return feed is not None and feed.live

    def __len__(self) -> int:
        """The waiters registered now."""
        return sum(len(waiters) for waiters in self._waiting.values())

    def watch(self, stores: Stores, workflow: str, what: str) -> Waiter:
        """Register a wait for announcements ``what`` of ``workflow``.

        Register first, then look: a change landing after the look wakes the waiter.
        """
        self._follow(stores)
        waiter = Waiter(self, workflow, what)
        self._waiting.setdefault(workflow, set()).add(waiter)
        return waiter

    def starting(self, stores: Stores, workflow: str) -> None:
        """Note that this process is about to create ``workflow`` (before its first write).

        While the feed stays live and announces no end of it, the workflow has not ended:
        its first wait for the end (`unannounced`) sleeps at once instead of looking.
        """
        # Only on a feed already followed and live: a start never opens the feed itself
        # (a program that only starts workflows holds no listening connection for it).
        if stores is self._over and self.live:
            self._fresh[workflow] = None
            if len(self._fresh) > FRESH_KEPT:
                del self._fresh[next(iter(self._fresh))]

    def unannounced(self, workflow: str) -> bool:
        """Whether ``workflow``, noted by `starting`, is sure not to have ended since.

        True once: the answer is used up. False when its end was announced, when
        announcements may have been missed, or while the feed is down.
        """
        fresh = self._fresh.pop(workflow, False) is None
        return fresh and self.live

    def drop(self, waiter: Waiter) -> None:
        """Unregister ``waiter`` (idempotent)."""
        waiters = self._waiting.get(waiter.workflow)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._waiting[waiter.workflow]
                self._forget(waiter.workflow)

    def _forget(self, workflow: str) -> None:
        """Drop ``workflow``'s last announcement once nobody waits or looks.

        A look still in flight must not be joined by a later waiter as if it were new.
        """
        if workflow not in self._waiting and all(key[0] != workflow for key in self._looks):
            self._announced.pop(workflow, None)

    async def shared(self, workflow: str, tag: str, look: Callable[[], Awaitable[T]]) -> T:
        """What ``look`` (a read of ``workflow``, named ``tag``) returns, read once.

        Every waiter that asks at the same time shares the read. A look of the same
        ``tag`` in flight is joined when it began after the workflow's
        last announcement (what it reads is at least that new); otherwise a new one
        starts. A thousand handles woken by one announcement cost the store one read.
        """
        loop = asyncio.get_running_loop()
        needed = max(self._announced.get(workflow, 0), self._missed)
        key = (workflow, tag)
        entry = self._looks.get(key)
        if entry is None or entry.started < needed or entry.loop is not loop:
            entry = _Look(self._tick, loop)
            self._looks[key] = entry
            task = loop.create_task(_awaited(look))
            task.add_done_callback(lambda done: self._looked(key, entry, done))
        # A future of its own per joiner (not a shield of the look: a thousand callbacks
        # on one future cost more): one joiner cancelled leaves the look to the others.
        joined: asyncio.Future[T] = loop.create_future()
        entry.joined.append(joined)
        return await joined

    def _looked(self, key: tuple[str, str], entry: _Look, task: asyncio.Task[Any]) -> None:
        if self._looks.get(key) is entry:
            del self._looks[key]
            self._forget(key[0])
        failure = None if task.cancelled() else task.exception()
        for joined in entry.joined:
            if joined.done():
                continue
            if task.cancelled():
                joined.cancel()
            elif failure is not None:
                joined.set_exception(failure)
            else:
                joined.set_result(task.result())

    def _follow(self, stores: Stores) -> None:
        """Subscribe to ``stores``' feed, once per stores (they change with the loop).

        A feed that is down stays subscribed: it reconnects, and announces `MISSED` then.
        """
        if stores is self._over:
            return
        self._fresh.clear()  # noted on the feed followed until now
        self._over, self._feed = stores, stores.changes
        if self._feed is not None:
            self._feed.start(self._changed)

    def _changed(self, workflow: str, what: str) -> None:
        self._tick += 1
        if what == MISSED:
            self._missed = self._tick
            self._fresh.clear()
            for waiters in list(self._waiting.values()):
                for waiter in list(waiters):
                    waiter.wake()
            return
        if what == ENDED:
            self._fresh.pop(workflow, None)
        waiting = self._waiting.get(workflow)
        if waiting is None:
            if any(key[0] == workflow for key in self._looks):
                self._announced[workflow] = self._tick  # for whoever joins that look
            return
        self._announced[workflow] = self._tick
        for waiter in list(waiting):
            if waiter.what == what:
                waiter.wake()


async def _awaited(look: Callable[[], Awaitable[T]]) -> T:
    return await look()


__all__ = ["FALLBACK_SECONDS", "FIRST_LOOK", "FRESH_KEPT", "Waiter", "Waiters"]
