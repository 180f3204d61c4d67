"""How a script call is written and read on the direct path: a write the socket takes at
once goes without a timer, one it cannot take whole still arrives whole, one a stalled
server stops reading times out and drops its connection; a reply that never comes times
out at ``socket_timeout`` and drops its connection, a caller cancelled mid-read leaves
nothing unread for the next call, an error reply keeps its connection; and the waiting
pool that `open_stores` builds lends its free connections the same way and takes them
back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from durably.redis import RedisStoreSettings
from durably.redis.scripts import Script
from tests.redis_service import RedisServer
from tests.reply_dropper import Proxy

pytestmark = pytest.mark.redis

_LENGTH = Script("return string.len(ARGV[1])", "length.lua")
_BIG = 8 * 1024 * 1024  # more than a socket takes in one write


async def test_a_write_the_socket_cannot_take_at_once_arrives_whole(
    redis_server: RedisServer,
) -> None:
    client = RedisStoreSettings(dsn=SecretStr(redis_server.url)).client(socket_timeout=5.0)
    try:
        for size in (10, _BIG, 10):
            assert await _LENGTH(client, ["k"], [b"x" * size]) == size
    finally:
        await client.aclose()


class _Stalling(Proxy):
    """Forwards connections to the server on ``port`` until `stall`, after which it
    forwards nothing more from the clients and reads no further (their writes back up into
    their sockets) until `resume`."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.flowing = asyncio.Event()
        self.flowing.set()

    def stall(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        back: asyncio.Task[None],
    ) -> None:
        while True:
            await self.flowing.wait()
            chunk = await reader.read(65536)
            if not chunk:
                break
            await self.flowing.wait()  # a chunk read just before a stall waits too
            up_writer.write(chunk)
            await up_writer.drain()


@contextlib.asynccontextmanager
async def _stalling(server: RedisServer, timeout: float) -> AsyncIterator[tuple[_Stalling, Redis]]:
    """A client with ``timeout`` as its socket timeout, connected through a `_Stalling`
    proxy, its first call answered (connected, the script cached)."""
    proxy = _Stalling(server.port)
    port = await proxy.start()
    client = Redis(host="127.0.0.1", port=port, socket_timeout=timeout)
    try:
        assert await _LENGTH(client, ["k"], [b"x"]) == 1
        yield proxy, client
    finally:
        await client.aclose()
        await proxy.stop()


def _dropped(client: Redis) -> bool:
    """Whether no connection of ``client``'s pool is lent out or still connected."""
    pool = client.connection_pool
    return not pool._in_use_connections and all(
        not c.is_connected for c in pool._available_connections
    )


async def test_a_write_a_stalled_server_never_reads_times_out_and_drops_the_connection(
    redis_server: RedisServer,
) -> None:
    async with _stalling(redis_server, 0.5) as (proxy, client):
        proxy.stall()
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(RedisTimeoutError, match="writing"):
            await asyncio.wait_for(_LENGTH(client, ["k"], [b"x" * _BIG]), 10)
        assert loop.time() - started < 5
        assert _dropped(client)


async def test_a_reply_that_never_comes_times_out_and_drops_the_connection(
    redis_server: RedisServer,
) -> None:
    async with _stalling(redis_server, 0.5) as (proxy, client):
        proxy.stall()  # the call is written, never delivered: no reply comes
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(RedisTimeoutError, match="reading"):
            await asyncio.wait_for(_LENGTH(client, ["k"], [b"xy"]), 10)
        assert 0.4 < loop.time() - started < 5
        assert _dropped(client)
        proxy.resume()
        assert await _LENGTH(client, ["k"], [b"xyz"]) == 3  # on a new connection


async def test_calls_in_a_row_share_one_read_timer_and_each_still_times_out_on_its_own(
    redis_server: RedisServer,
) -> None:
    async with _stalling(redis_server, 0.5) as (proxy, client):
        loop = asyncio.get_running_loop()
        timers: list[float] = []
        call_at = loop.call_at

        def counted(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
            timers.append(when)
            return call_at(when, callback, *args, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(loop, "call_at", counted)
            for n in range(200):
                assert await _LENGTH(client, ["k"], [b"x" * n]) == n
        # One timer a connection, re-armed only as it fires: not one made a call.
        assert len(timers) <= 2
        await asyncio.sleep(0.3)  # the shared timer is now older than any read to come
        proxy.stall()
        started = loop.time()
        with pytest.raises(RedisTimeoutError, match="reading"):
            await asyncio.wait_for(_LENGTH(client, ["k"], [b"late"]), 10)
        assert 0.45 < loop.time() - started < 5  # its own 0.5 s, not what was left of one
        assert _dropped(client)


async def test_a_caller_cancelled_mid_read_leaves_no_reply_for_the_next_call(
    redis_server: RedisServer,
) -> None:
    async with _stalling(redis_server, 30.0) as (proxy, client):
        proxy.stall()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(_LENGTH(client, ["k"], [b"xx"]), 0.3)
        assert _dropped(client)
        proxy.resume()  # the stalled call may now reach the server: its reply is gone
        assert [await _LENGTH(client, ["k"], [b"y" * n]) for n in (3, 4, 5)] == [3, 4, 5]


async def test_an_error_reply_raises_and_keeps_its_connection(
    redis_server: RedisServer,
) -> None:
    client = Redis.from_url(redis_server.url, socket_timeout=5.0)
    failing = Script("return redis.call('NO-SUCH-COMMAND')", "failing.lua")
    try:
        assert await _LENGTH(client, ["k"], [b"x"]) == 1
        connection = next(iter(client.connection_pool._available_connections))
        with pytest.raises(ResponseError, match=r"(?i)unknown"):
            await failing(client, ["k"], [])
        assert connection.is_connected
        assert client.connection_pool._available_connections == [connection]
        assert await _LENGTH(client, ["k"], [b"xy"]) == 2
    finally:
        await client.aclose()


async def test_a_waiting_pool_lends_its_free_connections_and_takes_them_back(
    redis_server: RedisServer,
) -> None:
    settings = RedisStoreSettings(dsn=SecretStr(redis_server.url), pool_size=2)
    client = settings.client()
    try:
        sizes = list(range(1, 41))
        answers = await asyncio.gather(*(_LENGTH(client, ["k"], [b"y" * n]) for n in sizes))
        assert answers == sizes
        pool = client.connection_pool
        assert not pool._in_use_connections
        assert 1 <= len(pool._available_connections) <= 2
    finally:
        await client.aclose()
