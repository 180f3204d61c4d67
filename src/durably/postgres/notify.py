"""Wakeups without polling: one dedicated connection LISTENs, and writers NOTIFY in the
same statement (delivered on commit).

A waiter takes the channel's current `asyncio.Event` *before* it looks for work, so a
notification committed after the look still wakes it. Polling stays as the fallback: while
the listening connection is down (it reconnects with backoff) waiters wake on their poll
interval, and every reconnect wakes everyone once in case something was missed. A
database that cannot listen (behind a transaction pooler with no direct DSN) never opens
the connection: its waiters poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from durably.postgres import statements
from durably.postgres.executor import AsyncpgDatabase, Database

_STATEMENTS = statements.load("notify.sql")
_LISTEN = _STATEMENTS["listen"]
_log = logging.getLogger("durably.postgres")


class Listener:
    """Listens on ``channels`` over a dedicated connection, started on first use.

    ``on_notify`` is called with each notification's channel and payload; ``on_state``
    with True once LISTENing (after every connect) and False when the connection is lost.
    """

    def __init__(
        self,
        database: Database,
        channels: Iterable[str],
        *,
        reconnect_seconds: float = 0.2,
        on_notify: Callable[[str, str], None] | None = None,
        on_state: Callable[[bool], None] | None = None,
    ) -> None:
        self._database = database
        self._channels = tuple(channels)
        self._reconnect_seconds = reconnect_seconds
        self._events: dict[str, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._connection: Any = None
        self._listened_before = False
        self._on_notify = on_notify
        self._on_state = on_state
        self._polling = not database.listens

    def event(self, channel: str) -> asyncio.Event:
        """The event the next notification on ``channel`` sets (starts the listener)."""
        self._start()
        event = self._events.get(channel)
        if event is None or event.is_set():
            event = self._events[channel] = asyncio.Event()
        return event

    async def armed(self, channel: str, timeout: float) -> asyncio.Event:
        """`event` once the listener is LISTENing (waiting up to ``timeout`` for it), so a
        look for work made after this call cannot miss a notification."""
        event = self.event(channel)
        if not self.connected and timeout > 0 and not self._polling:
            await self.ready(timeout)
            event = self.event(channel)
        return event

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection, while it is up."""
        connection = self._connection
        if connection is None or not self.connected:
            return None
        if isinstance(self._database, AsyncpgDatabase):
            from asyncpg.exceptions import InterfaceError

            try:
                return int(connection.get_server_pid())
            except InterfaceError:
                # asyncpg hands a pooled connection back to its pool as soon as it sees
                # the server close it, before this listener notices: it is down.
                return None
        return int(connection.info.backend_pid)

    @property
    def connected(self) -> bool:
        """Whether the listening connection is up and LISTENing."""
        return self._connected.is_set()

    async def ready(self, timeout: float = 5.0) -> bool:
        """Wait until the listener is LISTENing (for tests and benchmarks); False at
        once for a database that cannot listen."""
        if self._polling:
            return False
        self._start()
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except TimeoutError:
            return False
        return True

    @staticmethod
    async def wait(event: asyncio.Event, timeout: float) -> bool:
        """Wait for ``event`` up to ``timeout`` seconds; whether it fired."""
        if timeout <= 0:
            return event.is_set()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Stop listening and close the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def start(self) -> None:
        """Start listening (reconnecting with backoff) unless it already does."""
        self._start()

    def _start(self) -> None:
        if self._polling:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _notified(self, channel: str, payload: str) -> None:
        if self._on_notify is not None:
            self._on_notify(channel, payload)
        self._fire(channel)

    def _listening(self, up: bool) -> None:
        if up:
            self._connected.set()
        else:
            self._connected.clear()
        if self._on_state is not None:
            self._on_state(up)

    def _fire(self, channel: str) -> None:
        event = self._events.pop(channel, None)
        if event is not None:
            event.set()

    def _fire_all(self) -> None:
        for channel in list(self._events):
            self._fire(channel)

    def _fire_all_after_reconnect(self) -> None:
        # Anything notified while the connection was down was lost: wake everyone once.
        if self._listened_before:
            self._fire_all()
        self._listened_before = True

    async def _run(self) -> None:
        delay = self._reconnect_seconds
        while True:
            try:
                await self._listen_once()
                delay = self._reconnect_seconds
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the connection dropped: poll until it is back
                _log.warning("durably listener lost its connection (%s)", type(error).__name__)
            finally:
                self._listening(False)
                self._fire_all()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _listen_once(self) -> None:
        connection = await self._database.listen_connection()
        self._connection = connection
        try:
            if isinstance(self._database, AsyncpgDatabase):
                await self._listen_asyncpg(connection)
            else:
                await self._listen_psycopg(connection)
        finally:
            self._connection = None
            with contextlib.suppress(Exception):
                if isinstance(self._database, AsyncpgDatabase):
                    await self._database.release_listen_connection(connection)
                else:
                    await connection.close()

    async def _listen_psycopg(self, connection: Any) -> None:
        for channel in self._channels:
            await connection.execute(statements.render(_LISTEN, {"channel": channel}))
        self._listening(True)
        self._fire_all_after_reconnect()
        async for notification in connection.notifies():
            self._notified(notification.channel, notification.payload)

    async def _listen_asyncpg(self, connection: Any) -> None:
        lost = asyncio.Event()

        def on_notify(_connection: Any, _pid: int, channel: str, payload: str) -> None:
            self._notified(channel, payload)

        connection.add_termination_listener(lambda _connection: lost.set())
        for channel in self._channels:
            await connection.add_listener(channel, on_notify)
        self._listening(True)
        self._fire_all_after_reconnect()
        try:
            # asyncpg reports a dropped connection through the termination listener only
            # once something touches the socket; a cheap periodic query makes that prompt.
            while not lost.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lost.wait(), 1.0)
                if not lost.is_set():
                    await connection.fetch(_STATEMENTS["ping"])
        finally:
            for channel in self._channels:
                with contextlib.suppress(Exception):
                    await connection.remove_listener(channel, on_notify)
        raise ConnectionError("listening connection closed")


__all__ = ["Listener"]
