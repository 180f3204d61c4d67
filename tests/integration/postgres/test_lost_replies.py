"""A state write whose answer is lost with the connection after PostgreSQL committed it:
the retry must not report the caller's own write as someone else's (a version conflict).
A real TCP proxy between the pool and the real server drops that one answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from pydantic import SecretStr

from durably import ManualClock, RunRecord, SessionRecord, StateKey
from durably.errors import StateConflictError
from durably.postgres import PostgresStateStore, migrate
from durably.postgres.settings import PostgresStoreSettings
from tests.pg_service import Stores, close_pool, open_pool
from tests.reply_dropper import ReplyDropper

pytestmark = pytest.mark.postgres


@pytest.fixture
async def dropping_store(
    postgres_dsn: str, pg_driver: str, pg_stores: Stores
) -> AsyncIterator[tuple[PostgresStateStore, ReplyDropper]]:
    tables = await pg_stores.tables()
    parts = urlsplit(postgres_dsn)
    dropper = ReplyDropper(parts.port or 5432, b"lost-reply")
    port = await dropper.start()
    proxied = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))
    pool = await open_pool(pg_driver, proxied, size=2)
    await migrate(pool, tables)
    settings = PostgresStoreSettings(dsn=SecretStr(proxied), max_attempts=5, backoff_seconds=0.01)
    store = PostgresStateStore(pool, clock=ManualClock(), settings=settings, tables=tables)
    # Warm the statements up first: the request dropped must be the write itself.
    await store.put_run(RunRecord(run_id="warm", tenant="t", agent_name="a"))
    await store.put_session(SessionRecord(session_id="warm", tenant="t"))
    yield store, dropper
    await close_pool(pool)
    await dropper.stop()


async def test_a_run_write_whose_answer_was_lost_is_not_reported_as_a_conflict(
    dropping_store: tuple[PostgresStateStore, ReplyDropper],
) -> None:
    store, dropper = dropping_store
    written = await store.put_run(RunRecord(run_id="lost-reply", tenant="t", agent_name="a"))
    assert dropper.dropped == 1
    stored = await store.get_run(StateKey(tenant="t", id="lost-reply"))
    assert stored is not None
    assert (written.version, stored.version, stored.agent_name) == (1, 1, "a")


async def test_a_session_write_whose_answer_was_lost_is_not_reported_as_a_conflict(
    dropping_store: tuple[PostgresStateStore, ReplyDropper],
) -> None:
    store, dropper = dropping_store
    written = await store.put_session(SessionRecord(session_id="lost-reply", tenant="t"))
    assert dropper.dropped == 1
    stored = await store.get_session(StateKey(tenant="t", id="lost-reply"))
    assert stored is not None
    assert (written.version, stored.version) == (1, 1)


async def test_another_writers_committed_write_is_still_a_conflict(
    dropping_store: tuple[PostgresStateStore, ReplyDropper],
) -> None:
    store, _ = dropping_store
    record = RunRecord(run_id="raced", tenant="t", agent_name="a")
    await store.put_run(record)
    with pytest.raises(StateConflictError):
        await store.put_run(record)  # the same record, the same instant: another write
