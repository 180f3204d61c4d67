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
from types import TracebackType
from typing import Self

from durably.stores.changes import MISSED, ChangeFeed
from durably.stores.opening import Stores

FIRST_LOOK = 0.01
"""While polling: the first pause between looks (seconds), doubled after each look."""
FALLBACK_SECONDS = 1.0
"""While polling: the longest pause between a waiter's looks (seconds)."""


class Waiter:
    """One handle's wait for ``workflow`` (a context manager: leaving it unregisters)."""

    def __init__(self, waiters: Waiters, workflow: str, what: str) -> None:
        self._waiters = waiters
        self.workflow = workflow
        self.what = what
        self._loop = asyncio.get_running_loop()
        self._woken = asyncio.Event()
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
        if running is self._loop:
            self._woken.set()
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._woken.set)

    async def pause(self, deadline: float | None) -> bool:
        """Sleep until the store announces a change of the workflow (or, while polling,
        until the next look); False, at once, when ``deadline`` (loop time) has passed."""
        live = self._waiters.live and not self._polled
        self._polled = False
        wait = math.inf if live else self._look
        if deadline is not None:
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return False
            wait = min(wait, remaining)
        if not self._woken.is_set():
            try:
                await asyncio.wait_for(self._woken.wait(), None if wait == math.inf else wait)
            except TimeoutError:
                pass
        self._woken.clear()
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


class Waiters:
    """The waiters of one App, keyed by workflow, behind one subscription (see module)."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[Waiter]] = {}
        self._over: Stores | None = None
        self._feed: ChangeFeed | None = None

    @property
    def live(self) -> bool:
        """Whether announcements arrive now (else waiters poll)."""
        feed = self._feed
        return feed is not None and feed.live

    def __len__(self) -> int:
        """The waiters registered now."""
        return sum(len(waiters) for waiters in self._waiting.values())

    def watch(self, stores: Stores, workflow: str, what: str) -> Waiter:
        """Register a wait for announcements ``what`` of ``workflow`` (register first, then
        look: a change landing after the look wakes the waiter)."""
        self._follow(stores)
        waiter = Waiter(self, workflow, what)
        self._waiting.setdefault(workflow, set()).add(waiter)
        return waiter

    def drop(self, waiter: Waiter) -> None:
        """Unregister ``waiter`` (idempotent)."""
        waiters = self._waiting.get(waiter.workflow)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._waiting[waiter.workflow]

    def _follow(self, stores: Stores) -> None:
        """Subscribe to ``stores``' feed, once per stores (they change with the loop). A
        feed that is down stays subscribed: it reconnects, and announces `MISSED` then."""
        if stores is self._over:
            return
        self._over, self._feed = stores, stores.changes
        if self._feed is not None:
            self._feed.start(self._changed)

    def _changed(self, workflow: str, what: str) -> None:
        if what == MISSED:
            for waiters in list(self._waiting.values()):
                for waiter in list(waiters):
                    waiter.wake()
            return
        for waiter in list(self._waiting.get(workflow, ())):
            if waiter.what == what:
                waiter.wake()


__all__ = ["FALLBACK_SECONDS", "FIRST_LOOK", "Waiter", "Waiters"]
