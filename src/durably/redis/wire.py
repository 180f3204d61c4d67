"""Talking to Redis on a redis-py connection directly: packing a call, sending it, reading
its reply, and lending and taking back a pooled connection, without redis-py's per-command
layers (its retries, bookkeeping and timers cost more client time than the round trip's
own packing and parsing). Used by `durably.redis.scripts` on a standalone client and by
`durably.redis.cluster` on a cluster node's connection.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from redis import VERSION

try:  # the one listener redis-py registers for a released connection (see `_give_back`)
    from redis.event import AsyncAfterConnectionReleasedEvent as _Released
    from redis.event import AsyncReAuthConnectionListener as _ReAuth
except ImportError:  # pragma: no cover - redis-py before 5.3
    _Released = _ReAuth = None  # type: ignore[assignment,misc]

try:  # redis-py's hiredis parser, read directly by `read` (see there)
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
    from redis._parsers.hiredis import _AsyncHiredisParser
except ImportError:  # pragma: no cover - another redis-py layout, or no hiredis
    _AsyncHiredisParser = None  # type: ignore[assignment,misc]
    _NOT_ENOUGH_DATA = None

# Whether this redis-py's pool takes a connection in a step of its own (see `sent`).
_TAKES_UNPROBED = hasattr(ConnectionPool, "get_available_connection")
# redis-py before 5.3 names the command when taking a pooled connection (later ones warn).
_POOL_ARGS: tuple[str, ...] = () if VERSION >= (5, 3) else ("EVALSHA",)
_metrics: Any = None
try:  # redis-py 8's own metrics (OpenTelemetry), kept per command when switched on
    from redis.observability.providers import get_observability_instance as _metrics
except ImportError:  # pragma: no cover - redis-py before 8
    pass


def observed() -> bool:
    """Whether redis-py's own metrics are switched on."""
    return _metrics is not None and _metrics().get_provider_manager() is not None


def direct_pool(client: Any) -> Any:
    """The pool of ``client`` when a script may be sent on one of its connections
    directly: a plain standalone client, not pinned to one connection, with no reply
    callback of its own for scripts and redis-py's metrics off. Anything else (a cluster,
    which has `WaitingCluster.routed`; `ReplicaWait`, a subclass) goes through
    ``execute_command``."""
    if (
        type(client) is not Redis
        or client.single_connection_client
        # Its keys are stored upper-cased; its own __contains__ upper-cases per call.
        or dict.__contains__(client.response_callbacks, "EVALSHA")
        or observed()
    ):
        return None
    pool = client.connection_pool
    kwargs = pool.connection_kwargs
    if kwargs.get("encoding", "utf-8") != "utf-8" or kwargs.get("encoding_errors", "strict") != (
        "strict"
    ):
        return None  # `packed_call` writes text as strict UTF-8, as such a client does
    return pool


def packed_call(head: bytes, numkeys: int, rest: tuple[Any, ...]) -> bytes | None:
    """``EVALSHA sha numkeys *rest`` in the protocol (``head`` is the packed ``EVALSHA sha``),
    as redis-py's `pack_command` writes it for a UTF-8 client; None when an argument is of a
    type left to redis-py (which raises for it). Written out because redis-py's packing
    costs about 0.8 µs an argument and a script call carries a dozen."""
    parts = [b"*%d\r\n" % (len(rest) + 3), head, b"$%d\r\n%d\r\n" % (len(str(numkeys)), numkeys)]
    return _packed_arguments(parts, rest)


def packed_command(command: tuple[Any, ...]) -> bytes | None:
    """The plain command ``command`` (its name, then its arguments) in the protocol, as
    `packed_call` writes a script call; None when an argument is of a type left to
    redis-py."""
    return _packed_arguments([b"*%d\r\n" % len(command)], command)


def _packed_arguments(parts: list[bytes], arguments: tuple[Any, ...]) -> bytes | None:
    """``parts`` (a command's head) followed by each of ``arguments`` as a bulk string,
    joined; None at the first argument that is not a str, int, float or bytes."""
    append = parts.append
    for arg in arguments:
        kind = type(arg)
        if kind is str:
            arg = arg.encode()
        elif kind is int or kind is float:
            arg = repr(arg).encode()
        elif kind is not bytes:
            return None
        append(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(parts)


def bulk(value: bytes) -> bytes:
    """``value`` as a bulk string of the protocol."""
    return b"$%d\r\n%b\r\n" % (len(value), value)


async def _connection(pool: Any) -> Any:
    """A connection of ``pool`` for `sent` and `sent_many`."""
    if _TAKES_UNPROBED and pool.connection_kwargs.get("protocol") in (None, 2, "2"):
        # Taken as redis-py's `get_connection` takes it, without the probe for unread data
        # it makes per call (an event-loop turn, about 10 µs of client time): a reply is
        # always read whole here and a call cut short drops its connection, so none is
        # left unread; a connection the server closed fails its call, which `Retry`
        # repeats on a new one.
        if type(pool) is ConnectionPool:
            return pool.get_available_connection()  # type: ignore[no-untyped-call]
        if (
            _unwaited(pool)  # none waits before it
            and not getattr(pool, "_in_maintenance", True)
            and pool.can_get_connection()
        ):
            # A waiting pool (`RedisStoreSettings.client`) with a connection to spare now:
            # taken the same way. Only a caller that must wait goes through its wait.
            return ConnectionPool.get_available_connection(pool)  # type: ignore[no-untyped-call]
    return await pool.get_connection(*_POOL_ARGS)


def _unwaited(pool: Any) -> bool:
    """Whether ``pool`` is a waiting pool whose condition no caller holds or waits on, so
    a connection may be lent or taken back without it (no one is overtaken or left
    unwoken)."""
    condition = getattr(pool, "_condition", None)
    return (
        isinstance(pool, BlockingConnectionPool)
        and condition is not None
        and not condition.locked()
        and not getattr(condition, "_waiters", None)
    )


async def _dropped(
    connection: Any, error: BaseException, doing: str, timed_out: bool
) -> BaseException:
    """Drop ``connection`` after ``error`` while ``doing`` ("writing to" or "reading
    from") its socket, and what to raise for it, as redis-py does: its `TimeoutError`
    for a timeout, its `ConnectionError` for an `OSError`, else ``error`` itself."""
    await connection.disconnect(nowait=True)
    if timed_out or isinstance(error, TimeoutError):
        timeout = RedisTimeoutError(f"Timeout {doing} socket")
        timeout.__suppress_context__ = True
        return timeout
    if isinstance(error, OSError):
        failure = RedisConnectionError(f"Error while {doing} socket: {error}")
        failure.__cause__ = error
        return failure
    return error


async def send(connection: Any, packed: bytes) -> None:
    """Send ``packed`` on ``connection`` as its `send_packed_command` does, minus the
    timer that wraps every write when a socket timeout is set (`asyncio.wait_for`, a task
    and two event-loop turns a call on Python 3.11): a write the socket takes at once
    cannot time out, so only one it could not take whole waits, for at most that timeout.
    Failures drop the connection and raise as redis-py's do."""
    writer = getattr(connection, "_writer", None)
    if (
        writer is None
        or not connection.is_connected
        or writer.transport.is_closing()
        or getattr(connection, "health_check_interval", 0)
    ):
        await connection.send_packed_command(packed)
        return
    try:
        writer.write(packed)
        if writer.transport.get_write_buffer_size():
            await asyncio.wait_for(writer.drain(), connection.socket_timeout)
    except BaseException as error:
        raise await _dropped(connection, error, "writing to", False)  # noqa: B904


async def sent_many(pool: Any, packed: bytes, count: int) -> list[Any]:
    """``count`` packed commands in one write on a connection of ``pool``: each reply, or
    the `ResponseError` it answered (read whole, so the connection stays in step); any
    other failure drops the connection and raises, as in `sent`."""
    connection = await _connection(pool)
    try:
        await send(connection, packed)
        replies: list[Any] = []
        for _ in range(count):
            try:
                replies.append(await read(connection))
            except ResponseError as error:
                replies.append(error)
        return replies
    finally:
        await _give_back(pool, connection)


async def sent(pool: Any, command: bytes | tuple[Any, ...]) -> Any:
    """``command`` (packed, or its arguments to pack) on a connection of ``pool``: its
    reply, or the error it raised (a connection that failed mid-call is disconnected by
    redis-py)."""
    connection = await _connection(pool)
    try:
        if type(command) is not bytes:
            command = b"".join(connection.pack_command(*command))
        await send(connection, command)
        return await read(connection)
    finally:
        await _give_back(pool, connection)


async def _give_back(pool: Any, connection: Any) -> None:
    """Return ``connection`` to ``pool``: at once when its ``release`` would do nothing
    more (no lock held, no caller waiting, no re-authentication due, redis-py's metrics
    off, as `direct_pool` made sure), else through ``release``. About 10 µs of client
    time a call: the release takes the pool's lock (and a waiting pool's condition) and
    dispatches an event per call."""
    lock = getattr(pool, "_lock", None)
    reconnect = getattr(connection, "should_reconnect", None)  # redis-py 6 and later
    dispatcher = getattr(pool, "_event_dispatcher", None)
    listeners = getattr(dispatcher, "_event_listeners_mapping", {}).get(_Released, ())
    if (
        _Released is None
        or lock is None
        or lock.locked()
        or connection not in pool._in_use_connections
        or (reconnect is not None and reconnect())
        or getattr(connection, "_re_auth_token", None) is not None
        or any(type(listener) is not _ReAuth for listener in listeners)
    ):
        await pool.release(connection)
        return
    if type(pool) is not ConnectionPool and not _unwaited(pool):
        await pool.release(connection)  # it wakes the caller waiting for a connection
        return
    pool._in_use_connections.remove(connection)
    pool._available_connections.append(connection)


async def read(connection: Any) -> Any:
    """The next reply on ``connection``, as its ``read_response`` gives it (an error
    reply raised as its `ResponseError`, a push notification handed to its handler first),
    read from its hiredis reader directly.

    redis-py wraps each read in ``asyncio.timeout`` and three layers of calls, about a
    sixth of a script call's client time; here a plain timer bounds the read instead: at
    ``socket_timeout`` it aborts the connection's transport, which ends the read, and the
    call raises redis-py's `TimeoutError`. Any failure drops the connection, as redis-py
    does. A connection this cannot read so (health checks, another parser) goes through
    ``read_response``."""
    parser = connection._parser
    reader = getattr(parser, "_reader", None)
    if (
        type(parser) is not _AsyncHiredisParser
        or reader is None
        or connection.health_check_interval
    ):
        return await connection.read_response()
    push = getattr(parser, "_hiredis_PushNotificationType", None)
    while True:
        reply = reader.gets()
        if reply is _NOT_ENOUGH_DATA:
            reply = await _arrival(connection, parser, reader)
        if push is None or not isinstance(reply, push):
            break
        await parser.handle_push_response(reply)  # type: ignore[no-untyped-call]
    if isinstance(reply, ResponseError | RedisConnectionError):
        if isinstance(reply, RedisConnectionError):
            await connection.disconnect(nowait=True)
        raise reply
    if type(reply) is list and reply and isinstance(reply[0], RedisConnectionError):
        await connection.disconnect(nowait=True)
        raise reply[0]
    return reply


async def _arrival(connection: Any, parser: Any, reader: Any) -> Any:
    """Read from ``connection`` until ``reader`` holds a whole reply; within the
    connection's ``socket_timeout`` (redis-py's `TimeoutError` after it). Any failure drops
    the connection."""
    watch = None
    if connection.socket_timeout is not None:
        watch = connection.__dict__.get(_WATCH)
        if watch is None:
            watch = connection.__dict__[_WATCH] = _ReadWatch(connection)
        watch.begin()
    stream = parser._stream
    reply = _NOT_ENOUGH_DATA
    try:
        while reply is _NOT_ENOUGH_DATA:
            data = await stream.read(parser._read_size)
            if not data:
                if watch is not None and watch.expired:
                    raise TimeoutError
                raise RedisConnectionError("Connection closed by server.")
            reader.feed(data)
            reply = reader.gets()
    except BaseException as error:
        expired = watch is not None and watch.expired
        raise await _dropped(connection, error, "reading from", expired)  # noqa: B904
    finally:
        if watch is not None:
            watch.started = None
    if watch is not None and watch.expired:  # it fired in the turn the reply arrived
        await connection.disconnect(nowait=True)
    return reply


_WATCH = "_durably_read_watch"


class _ReadWatch:
    """Bounds each read of one connection by its ``socket_timeout`` with one timer for
    many reads: a read notes when it began, and a timer (armed by a read when none is)
    aborts the connection's transport once the read in progress is older than the
    timeout, or re-arms for it. Back-to-back calls share a timer rather than making and
    cancelling one each (about 3 µs of a script call's client time)."""

    __slots__ = ("connection", "expired", "loop", "started", "timer")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.started: float | None = None
        self.expired = False
        self.timer: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def begin(self) -> None:
        loop = asyncio.get_running_loop()
        self.started = now = loop.time()
        self.expired = False
        if self.timer is None or self.loop is not loop:  # none pending on this loop
            self.loop = loop
            self.timer = loop.call_at(now + self.connection.socket_timeout, self._check)

    def _check(self) -> None:
        self.timer = None
        started, loop = self.started, self.loop
        if started is None or loop is None:
            return  # no read in progress: the next one arms a timer
        due = started + self.connection.socket_timeout
        if loop.time() >= due:
            self.expired = True
            writer = getattr(self.connection, "_writer", None)
            if writer is not None:
                writer.transport.abort()  # ends the read
        else:
            self.timer = loop.call_at(due, self._check)


__all__ = [
    "bulk",
    "direct_pool",
    "observed",
    "packed_call",
    "read",
    "send",
    "sent",
    "sent_many",
]
