"""Wakeups without polling: one connection per pool LISTENs for every store over that
pool, and writers NOTIFY in the same statement (delivered on commit).

Each store holds a `Listener` for its channels; the listeners over one pool share its
`ListeningConnection`, which LISTENs on the channels its listeners want (UNLISTENing
those no open listener wants any more) and closes when the last listener closes. So a
process holds one listening connection per pool, however many stores and workflow kinds
it serves.

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
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from durably.postgres import statements
from durably.postgres.executor import AsyncpgDatabase, Database

_STATEMENTS = statements.load("notify.sql")
_log = logging.getLogger("durably.postgres")

RECONNECT_SECONDS = 0.2
"""The first pause before connecting again after the listening connection was lost
(doubling to 5 s)."""
PING_SECONDS = 1.0
"""How often an asyncpg listening connection is pinged: asyncpg reports a dropped
connection only once something touches its socket."""

OnNotify = Callable[[str, str], None]


class Listener:
    """Listens on ``channels`` over its pool's `ListeningConnection`, joined on first use.

    ``on_notify`` is called with each notification's channel and payload; ``on_state``
    with True once its channels are LISTENed on (after every connect) and False when the
    connection is lost or this listener closes.
    """

    def __init__(
        self,
        database: Database,
        channels: Iterable[str],
        *,
        on_notify: OnNotify | None = None,
        on_state: Callable[[bool], None] | None = None,
    ) -> None:
        self._database = database
        self._channels = tuple(dict.fromkeys(channels))
        self._events: dict[str, asyncio.Event] = {}
        self._shared: ListeningConnection | None = None
        self._connected = asyncio.Event()
        self._listened_before = False
        self._on_notify = on_notify
        self._on_state = on_state
        self._polling = not database.listens

    @property
    def database(self) -> Database:
        """The database whose listening connection this listener joins."""
        return self._database

    @property
    def channels(self) -> tuple[str, ...]:
        """The channels this listener is woken on."""
        return self._channels

    @property
    def shared(self) -> ListeningConnection | None:
        """The listening connection this listener has joined (None before its first use,
        after `close`, and on a database that cannot listen)."""
        return self._shared

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
        shared = self._shared
        if shared is None or not self.connected:
            return None
        return shared.backend_pid

    @property
    def connected(self) -> bool:
        """Whether the listening connection is up and LISTENing on this listener's
        channels."""
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
        """Stop listening: leave the shared connection (UNLISTENing channels nobody else
        wants; closing it when this was its last listener) and wake every waiter."""
        shared, self._shared = self._shared, None
        if shared is not None:
            await shared.leave(self)

    def start(self) -> None:
        """Start listening (joining the pool's listening connection) unless it already does."""
        self._start()

    def _start(self) -> None:
        if self._polling or self._shared is not None:
            return
        self._shared = ListeningConnection.join(self)

    def notified(self, channel: str, payload: str) -> None:
        """A notification on one of this listener's channels (from the shared connection)."""
        if self._on_notify is not None:
            self._on_notify(channel, payload)
        self._fire(channel)

    def listening(self) -> None:
        """The shared connection LISTENs on every channel of this listener."""
        self._connected.set()
        if self._on_state is not None:
            self._on_state(True)
        # Anything notified while the connection was down was lost: wake everyone once.
        if self._listened_before:
            self._fire_all()
        self._listened_before = True

    def lost(self) -> None:
        """The shared connection was lost (or this listener left it): wake everyone."""
        self._connected.clear()
        if self._on_state is not None:
            self._on_state(False)
        self._fire_all()

    def _fire(self, channel: str) -> None:
        event = self._events.pop(channel, None)
        if event is not None:
            event.set()

    def _fire_all(self) -> None:
        for channel in list(self._events):
            self._fire(channel)


# The listening connection of each pool on each event loop, while it has listeners.
_SHARED: dict[tuple[int, asyncio.AbstractEventLoop], ListeningConnection] = {}


class ListeningConnection:
    """The one connection a pool LISTENs on for all its `Listener`\\ s (see `join`).

    It connects when its first listener joins and reconnects with backoff, telling every
    listener of each loss and each connect; a channel is LISTENed while some listener
    wants it and UNLISTENed on the live connection once none does; the connection closes
    when the last listener leaves.
    """

    def __init__(self, database: Database, key: tuple[int, asyncio.AbstractEventLoop]) -> None:
        self._database = database
        self._key = key
        self._listeners: list[Listener] = []
        self._wanted: Counter[str] = Counter()
        self._listened: set[str] = set()
        self._live = False
        self._applied = False  # whether the current connection got as far as LISTENing
        self._changed = asyncio.Event()
        self._asks: list[asyncio.Future[list[str]]] = []
        self._connection: Any = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def join(cls, listener: Listener) -> ListeningConnection:
        """The listening connection of ``listener``'s pool, now also listening for it."""
        loop = asyncio.get_running_loop()
        key = (id(listener.database.pool), loop)
        shared = _SHARED.get(key)
        if shared is None:
            shared = _SHARED[key] = cls(listener.database, key)
            shared._task = loop.create_task(shared._run())
        shared._listeners.append(listener)
        shared._wanted.update(listener.channels)
        if shared._live and shared._listened.issuperset(listener.channels):
            listener.listening()
        else:
            shared._changed.set()
        return shared

    async def leave(self, listener: Listener) -> None:
        """Stop listening for ``listener``; close the connection if it was the last."""
        if listener not in self._listeners:
            return
        self._listeners.remove(listener)
        self._wanted.subtract(listener.channels)
        self._wanted = +self._wanted  # channels nobody wants any more go
        listener.lost()
        if self._listeners:
            self._changed.set()  # UNLISTEN what only ``listener`` wanted
            return
        if _SHARED.get(self._key) is self:
            del _SHARED[self._key]  # a listener joining from now on opens a new one
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def listeners(self) -> int:
        """How many listeners share this connection."""
        return len(self._listeners)

    @property
    def connection(self) -> Any:
        """The driver's connection while it is up (for tests), else None."""
        return self._connection

    @property
    def backend_pid(self) -> int | None:
        """The server process of the connection, while it is up."""
        connection = self._connection
        if connection is None or not self._live:
            return None
        if isinstance(self._database, AsyncpgDatabase):
            from asyncpg.exceptions import InterfaceError

            try:
                return int(connection.get_server_pid())
            except InterfaceError:
                # asyncpg hands a pooled connection back to its pool as soon as it sees
                # the server close it, before this connection's loop notices: it is down.
                return None
        return int(connection.info.backend_pid)

    async def server_channels(self, timeout: float = 5.0) -> list[str]:
        """The channels the server says this connection LISTENs on (for tests), asked on
        the connection itself once it is up; `TimeoutError` after ``timeout``."""
        asked: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        self._asks.append(asked)
        self._changed.set()
        return sorted(await asyncio.wait_for(asked, timeout))

    def _notified(self, channel: str, payload: str) -> None:
        for listener in list(self._listeners):
            if channel in listener.channels:
                listener.notified(channel, payload)

    async def _run(self) -> None:
        delay = RECONNECT_SECONDS
        while True:
            self._applied = False
            try:
                await self._serve(await self._database.listen_connection())
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the connection dropped: poll until it is back
                _log.warning("durably listener lost its connection (%s)", type(error).__name__)
            finally:
                self._live = False
                self._listened.clear()
                for listener in list(self._listeners):
                    listener.lost()
            if self._applied:
                delay = RECONNECT_SECONDS  # it was listening: the backoff starts again
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _serve(self, connection: Any) -> None:
        """Keep ``connection`` LISTENing on the wanted channels until it is lost."""
        line: _Line
        if isinstance(self._database, AsyncpgDatabase):
            line = _AsyncpgLine(connection, self._notified)
        else:
            line = _PsycopgLine(connection, self._notified)
        self._connection = connection
        self._live = True
        try:
            while True:
                self._changed.clear()
                await self._apply(line)
                self._applied = True
                await line.idle(self._changed)
        finally:
            self._connection = None
            with contextlib.suppress(Exception):
                await line.close(self._database)

    async def _apply(self, line: _Line) -> None:
        """LISTEN on what is wanted, UNLISTEN the rest; tell listeners whose channels
        are all LISTENed now; answer what tests asked."""
        for channel in sorted(set(self._wanted) - self._listened):
            await line.listen(channel)
            self._listened.add(channel)
        for channel in sorted(self._listened - set(self._wanted)):
            # Out of the set before the UNLISTEN is awaited: a listener joining for this
            # channel meanwhile is not told it listens, and the next round LISTENs again.
            self._listened.discard(channel)
            await line.unlisten(channel)
        for listener in list(self._listeners):
            if not listener.connected and self._listened.issuperset(listener.channels):
                listener.listening()
        asks, self._asks = self._asks, []
        if asks:
            channels = await line.channels()
            for asked in asks:
                if not asked.done():
                    asked.set_result(channels)


class _Line(Protocol):
    """What the shared connection asks of a driver's connection."""

    async def listen(self, channel: str) -> None: ...

    async def unlisten(self, channel: str) -> None: ...

    async def channels(self) -> list[str]: ...

    async def idle(self, changed: asyncio.Event) -> None:
        """Deliver notifications until ``changed`` is set; `ConnectionError` on a loss."""
        ...

    async def close(self, database: Database) -> None: ...


def _statement(name: str, channel: str) -> str:
    return statements.render(_STATEMENTS[name], {"channel": channel})


class _PsycopgLine:
    """A psycopg connection: its ``notifies()`` holds the connection while it waits, so
    it is stopped (at no loss: what arrives meanwhile is kept) to LISTEN or UNLISTEN."""

    def __init__(self, connection: Any, on_notify: OnNotify) -> None:
        self._connection = connection
        self._on_notify = on_notify

    async def listen(self, channel: str) -> None:
        await self._connection.execute(_statement("listen", channel))

    async def unlisten(self, channel: str) -> None:
        await self._connection.execute(_statement("unlisten", channel))

    async def channels(self) -> list[str]:
        cursor = await self._connection.execute(_STATEMENTS["channels"])
        return [str(row[0]) for row in await cursor.fetchall()]

    async def idle(self, changed: asyncio.Event) -> None:
        reading = asyncio.ensure_future(self._read())
        try:
            await _until_either(reading, changed)
        finally:
            stopped = not reading.done()
            if stopped:
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reading
        if stopped:
            return  # to change channels: the connection is still up
        reading.result()  # the connection's error, if it failed
        raise ConnectionError("listening connection closed")

    async def _read(self) -> None:
        async for notification in self._connection.notifies():
            self._on_notify(notification.channel, notification.payload)

    async def close(self, database: Database) -> None:
        await self._connection.close()


class _AsyncpgLine:
    """An asyncpg connection: notifications arrive by callback, a loss by the termination
    listener (prompted by a ping every `PING_SECONDS`)."""

    def __init__(self, connection: Any, on_notify: OnNotify) -> None:
        self._connection = connection
        self._lost = asyncio.Event()
        self._listened: set[str] = set()

        def notified(_connection: Any, _pid: int, channel: str, payload: str) -> None:
            on_notify(channel, payload)

        self._notified = notified
        connection.add_termination_listener(lambda _connection: self._lost.set())

    async def listen(self, channel: str) -> None:
        await self._connection.add_listener(channel, self._notified)
        self._listened.add(channel)

    async def unlisten(self, channel: str) -> None:
        self._listened.discard(channel)
        await self._connection.remove_listener(channel, self._notified)

    async def channels(self) -> list[str]:
        return [str(row[0]) for row in await self._connection.fetch(_STATEMENTS["channels"])]

    async def idle(self, changed: asyncio.Event) -> None:
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            while not changed.is_set():
                await _until_either(lost, changed, PING_SECONDS)
                if lost.done():
                    raise ConnectionError("listening connection closed")
                if not changed.is_set():
                    await self._connection.fetch(_STATEMENTS["ping"])
        finally:
            lost.cancel()

    async def close(self, database: Database) -> None:
        for channel in list(self._listened):
            with contextlib.suppress(Exception):
                await self.unlisten(channel)
        assert isinstance(database, AsyncpgDatabase)
        await database.release_listen_connection(self._connection)


async def _until_either(
    task: asyncio.Future[Any], event: asyncio.Event, timeout: float | None = None
) -> None:
    """Wait until ``task`` is done or ``event`` is set (or ``timeout`` passed)."""
    setting = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({task, setting}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        setting.cancel()


__all__ = ["PING_SECONDS", "RECONNECT_SECONDS", "Listener", "ListeningConnection"]
