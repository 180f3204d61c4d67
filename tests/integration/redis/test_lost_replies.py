"""A write whose reply is lost with the connection, after the server applied it: the retry
must not report the caller's own landed write as someone else's (a version conflict).
A real TCP proxy between the client and a real server drops that one reply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from durably import ManualClock, RunRecord, SessionRecord, StateKey
from durably.redis import RedisStateStore, RedisStoreSettings
from tests.redis_service import RedisServer, durable_server, unique_namespace

pytestmark = pytest.mark.redis


class ReplyDropper:
    """Forwards connections to ``server``; the first request carrying ``marker`` reaches the
    server, its reply is read and thrown away, and the client's connection is closed."""

    def __init__(self, server: RedisServer, marker: bytes) -> None:
        self._server = server
        self._marker = marker
        self.dropped = 0
        self._listener: asyncio.Server | None = None

    async def start(self) -> str:
        self._listener = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._listener.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}/0"

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._server.port)
        back = asyncio.create_task(self._pump(up_reader, writer))
        try:
            while chunk := await reader.read(65536):
                up_writer.write(chunk)
                await up_writer.drain()
                if self.dropped == 0 and self._marker in chunk:
                    self.dropped += 1
                    back.cancel()
                    await up_reader.read(65536)  # the server's reply: applied, never delivered
                    break
        finally:
            back.cancel()
            writer.close()
            up_writer.close()

    @staticmethod
    async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()


@pytest.fixture
async def dropping_store() -> AsyncIterator[tuple[RedisStateStore, ReplyDropper]]:
    dropper = ReplyDropper(durable_server(), b"lost-reply")
    url = await dropper.start()
    settings = RedisStoreSettings(
        dsn=SecretStr(url), namespace=unique_namespace(), max_attempts=5, backoff_seconds=0.01
    )
    client = settings.client()
    store = RedisStateStore(client, clock=ManualClock(), settings=settings)
    # Load the scripts first: the dropped request must be one the server applies, not a
    # NOSCRIPT answer to a first EVALSHA.
    await store.put_run(RunRecord(run_id="warm", tenant="t", agent_name="a"))
    await store.put_session(SessionRecord(session_id="warm", tenant="t"))
    yield store, dropper
    await client.aclose()
    await dropper.stop()


async def test_a_run_write_whose_reply_was_lost_is_not_reported_as_a_conflict(
    dropping_store: tuple[RedisStateStore, ReplyDropper],
) -> None:
    store, dropper = dropping_store
    written = await store.put_run(RunRecord(run_id="lost-reply", tenant="t", agent_name="a"))
    assert dropper.dropped == 1
    stored = await store.get_run(StateKey(tenant="t", id="lost-reply"))
    assert stored is not None
    assert (written.version, stored.version, stored.agent_name) == (1, 1, "a")


async def test_a_session_write_whose_reply_was_lost_is_not_reported_as_a_conflict(
    dropping_store: tuple[RedisStateStore, ReplyDropper],
) -> None:
    store, dropper = dropping_store
    written = await store.put_session(SessionRecord(session_id="lost-reply", tenant="t"))
    assert dropper.dropped == 1
    stored = await store.get_session(StateKey(tenant="t", id="lost-reply"))
    assert stored is not None
    assert (written.version, stored.version) == (1, 1)


async def test_another_writers_landed_write_is_still_a_conflict(
    dropping_store: tuple[RedisStateStore, ReplyDropper],
) -> None:
    from durably.errors import StateConflictError

    store, _ = dropping_store
    record = RunRecord(run_id="raced", tenant="t", agent_name="a")
    await store.put_run(record)
    with pytest.raises(StateConflictError):
        await store.put_run(record)  # the same record, the same instant: another write
