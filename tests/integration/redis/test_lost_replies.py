"""A write whose reply is lost with the connection, after the server applied it: the retry
must not report the caller's own landed write as someone else's (a version conflict).
A real TCP proxy between the client and a real server drops that one reply."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from durably import ManualClock, RunRecord, SessionRecord, StateKey
from durably.redis import RedisStateStore, RedisStoreSettings
from tests.redis_service import durable_server, unique_namespace
from tests.reply_dropper import ReplyDropper

pytestmark = pytest.mark.redis


@pytest.fixture
async def dropping_store() -> AsyncIterator[tuple[RedisStateStore, ReplyDropper]]:
    dropper = ReplyDropper(durable_server().port, b"lost-reply")
    url = f"redis://127.0.0.1:{await dropper.start()}/0"
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
