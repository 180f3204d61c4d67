"""`LoopStores`: an App's stores, held for the event loop that uses them.

Stores of a datastore hold connections, pools and waits of the event loop that opened
them, and serve no other. An App is often used from one loop after another (a script's
``asyncio.run`` calls, a test suite's module-level App under pytest-asyncio, which gives
each test a loop of its own), so the stores follow the loop: used from a later loop once
the first has stopped, they are let go and opened afresh there. Memory's stores are bound
to no loop and are kept (they hold the workflows). Two loops running at once in two
threads cannot share them: that is refused.

A loop that ends the way ``asyncio.run`` ends one (every task left is cancelled, and
awaited) closes the stores it opened on the way out: a task of theirs may ignore that
cancel (psycopg's pool workers catch it while they add a connection, then wait for more
work), and the loop would wait for it forever. A keeper task, waiting for nothing, is
cancelled beside them and closes the stores, which stops those workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from durably.errors import ConfigurationError
from durably.stores.opening import Stores

_logger = logging.getLogger("durably.app")

_KEEPER = "durably-stores-keeper"
LET_GO_SECONDS = 1.0
"""How long closing stores of a stopped event loop may take before they are left to the
garbage collector (which closes their sockets)."""


class LoopStores:
    """The stores ``opener`` opens, for the running event loop (see the module)."""

    def __init__(self, opener: Callable[[], Awaitable[Stores]], location: str) -> None:
        self._opener = opener
        self._location = location
        self._stores: Stores | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opening: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._started: set[asyncio.Task[object]] = set()
        """Tasks started on the loop while the stores opened (a pool's workers)."""
        self._keeper: asyncio.Task[None] | None = None
        """The task that closes the stores when their loop ends (see the module)."""

    @property
    def current(self) -> Stores | None:
        """The stores as held now (None before the first `get` and after `close`)."""
        return self._stores

    async def get(self) -> Stores:
        """Return the stores of the running loop, opened on first use there.

        Raises:
            ConfigurationError: The loop that opened them still runs (in another thread):
                one App serves one running loop at a time.
        """
        loop = asyncio.get_running_loop()
        stores = self._stores
        if stores is not None and self._loop is loop:
            return stores
        async with self._lock(loop):
            if self._stores is not None and self._loop is not loop:
                await self._leave(self._stores, loop)
            if self._stores is None:
                before = asyncio.all_tasks(loop)
                self._stores = stores = await self._opener()
                self._loop = loop
                self._started = asyncio.all_tasks(loop) - before
                if stores.bound_to_loop:
                    self._keeper = loop.create_task(self._keep(stores), name=_KEEPER)
        return self._stores

    async def _keep(self, stores: Stores) -> None:
        """Wait until cancelled (the loop ends: see the module), then close ``stores``.

        Stores this App no longer holds (closed, or let go) are left alone.
        """
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            if self._stores is stores:
                self._stores = self._loop = self._keeper = None
                self._started = set()
                try:
                    await asyncio.wait_for(stores.close(), LET_GO_SECONDS)
                except Exception as exc:
                    _logger.debug(
                        "closing %s as its event loop ends: %s",
                        stores.location,
                        type(exc).__name__,
                    )
            raise

    def _lock(self, loop: asyncio.AbstractEventLoop) -> asyncio.Lock:
        """The lock that opens the stores once on ``loop`` (a lock serves one loop)."""
        if self._opening is None or self._opening[0] is not loop:
            self._opening = (loop, asyncio.Lock())
        return self._opening[1]

    async def _leave(self, stores: Stores, loop: asyncio.AbstractEventLoop) -> None:
        """Move from the loop the stores were opened on to ``loop``.

        Stores bound to no loop are kept; the others are let go, to be opened afresh by
        the caller.
        """
        if not stores.bound_to_loop:
            self._loop = loop
            return
        opened_on = self._loop
        if opened_on is not None and opened_on.is_running():
            raise ConfigurationError(
                f"this App's stores ({self._location}) are in use on another event loop, "
                "which still runs (in another thread?): use one App per running event loop"
            )
        await self._let_go()

    async def close(self) -> None:
        """Close the stores (idempotent); stores of a loop that has stopped are let go."""
        stores = self._stores
        if stores is None:
            return
        if self._loop is asyncio.get_running_loop() or not stores.bound_to_loop:
            keeper = self._keeper
            self._stores = self._loop = self._keeper = None
            self._started = set()
            if keeper is not None:
                keeper.cancel()  # it finds the stores no longer held: nothing to close
            await stores.close()  # closes every `Stores.durable` scheduler first
        else:
            await self._let_go()

    async def _let_go(self) -> None:
        """Drop stores whose loop has stopped, closing what can still be closed from here.

        A SQLite file can be closed; a pool's tasks and a client's sockets belonged to
        that loop, and their connections close when they are collected. Never raises.

        Tasks the opening started and a closed loop left pending (a test runner may close
        a loop without cancelling its tasks) can never run again: they are ended here,
        rather than by the garbage collector, at some later moment, with errors of a
        closed loop that nobody can catch.
        """
        stores, opened_on, started = self._stores, self._loop, set(self._started)
        if self._keeper is not None:
            started.add(self._keeper)
        self._stores, self._loop, self._started, self._keeper = None, None, set(), None
        if opened_on is not None and opened_on.is_closed():
            for task in started:
                if not task.done():
                    with contextlib.suppress(BaseException):
                        task.get_coro().close()
                    # Its end is this one: no "destroyed but pending" when it is collected.
                    task._log_destroy_pending = False  # type: ignore[attr-defined]
        if stores is None:
            return
        try:
            await asyncio.wait_for(stores.close(), LET_GO_SECONDS)
        except Exception as exc:
            _logger.debug(
                "let go of %s, opened on an event loop that has stopped (%s)",
                stores.location,
                type(exc).__name__,
            )


__all__ = ["LET_GO_SECONDS", "LoopStores"]
