"""A state write whose answer is lost with the connection after the server applied it: the
retry must not report the caller's own write as someone else's (a version conflict). A real
TCP proxy between the client and a real server (Redis, PostgreSQL with either driver) drops
that one answer; SQLite and memory have no connection to lose."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from pydantic import SecretStr

from durably import ManualClock, RunRecord, SessionRecord, StateKey
from durably.errors import StateConflictError
from durably.postgres import PostgresStateStore, PostgresStoreSettings, StateTables, migrate
from durably.redis import RedisStateStore, RedisStoreSettings
from durably.runs import StateStore
from tests.pg_service import close_pool, open_pool, postgres_dsn
from tests.redis_service import durable_server, unique_namespace
from tests.reply_dropper import ReplyDropper

__all__ = ["postgres_dsn"]

MARKER = b"lost-reply"


async def _redis(dropper: ReplyDropper) -> tuple[StateStore, Any]:
    url = f"redis://127.0.0.1:{await dropper.start()}/0"
    settings = RedisStoreSettings(
        dsn=SecretStr(url), namespace=unique_namespace(), max_attempts=5, backoff_seconds=0.01
    )
    client = settings.client()
    return RedisStateStore(client, clock=ManualClock(), settings=settings), client.aclose


async def _postgres(dropper: ReplyDropper, dsn: str, driver: str) -> tuple[StateStore, Any]:
    parts = urlsplit(dsn)
    port = await dropper.start()
    proxied = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))
    pool = await open_pool(driver, proxied, size=2)
    tables = StateTables(schema=f"t_{unique_namespace()}")
    await migrate(pool, tables)
    settings = PostgresStoreSettings(dsn=SecretStr(proxied), max_attempts=5, backoff_seconds=0.01)
    store = PostgresStateStore(pool, clock=ManualClock(), settings=settings, tables=tables)
    return store, lambda: close_pool(pool)


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("psycopg", marks=pytest.mark.postgres),
        pytest.param("asyncpg", marks=pytest.mark.postgres),
    ]
)
async def dropping_store(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[StateStore, ReplyDropper]]:
    if request.param == "redis":
        dropper = ReplyDropper(durable_server().port, MARKER)
        store, close = await _redis(dropper)
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        dropper = ReplyDropper(urlsplit(dsn).port or 5432, MARKER)
        store, close = await _postgres(dropper, dsn, str(request.param))
    # Warm up first (scripts loaded, statements prepared): the request dropped must be the
    # write itself, applied by the server.
    await store.put_run(RunRecord(run_id="warm", tenant="t", agent_name="a"))
    await store.put_session(SessionRecord(session_id="warm", tenant="t"))
    yield store, dropper
    await close()
    await dropper.stop()


async def test_a_run_write_whose_answer_was_lost_is_not_reported_as_a_conflict(
    dropping_store: tuple[StateStore, ReplyDropper],
) -> None:
    store, dropper = dropping_store
    written = await store.put_run(RunRecord(run_id="lost-reply", tenant="t", agent_name="a"))
    assert dropper.dropped == 1
    stored = await store.get_run(StateKey(tenant="t", id="lost-reply"))
    assert stored is not None
    assert (written.version, stored.version, stored.agent_name) == (1, 1, "a")


async def test_a_session_write_whose_answer_was_lost_is_not_reported_as_a_conflict(
    dropping_store: tuple[StateStore, ReplyDropper],
) -> None:
    store, dropper = dropping_store
    written = await store.put_session(SessionRecord(session_id="lost-reply", tenant="t"))
    assert dropper.dropped == 1
    stored = await store.get_session(StateKey(tenant="t", id="lost-reply"))
    assert stored is not None
    assert (written.version, stored.version) == (1, 1)


async def test_another_writers_landed_write_is_still_a_conflict(
    dropping_store: tuple[StateStore, ReplyDropper],
) -> None:
    store, _ = dropping_store
    record = RunRecord(run_id="raced", tenant="t", agent_name="a")
    await store.put_run(record)
    with pytest.raises(StateConflictError):
        await store.put_run(record)  # the same record, the same instant: another write
