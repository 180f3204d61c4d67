"""`SqliteStoreSettings.max_value_bytes` bounds a stored run, session, work payload and
checkpointed value, as on every datastore backing: over it is
`StatePersistenceError(reason="too_large")` and nothing changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from durably.errors import StatePersistenceError
from durably.sqlite import (
    SqliteCheckpointer,
    SqliteDurable,
    SqliteScheduler,
    SqliteStateStore,
    SqliteStoreSettings,
    SqliteWorkQueue,
    connect,
)
from durably.stores.runs import RunRecord, SessionRecord, StateKey
from durably.stores.work import WorkItem


async def test_a_run_or_session_over_max_value_bytes_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    settings = SqliteStoreSettings(path=str(tmp_path / "app.db"), max_value_bytes=2000)
    database = await connect(settings=settings)
    try:
        store = SqliteStateStore(database)
        kept = await store.put_run(RunRecord(run_id="r", tenant="t", agent_name="a"))
        session = await store.put_session(SessionRecord(session_id="s", tenant="t"))
        for record in (kept, RunRecord(run_id="fresh", tenant="t", agent_name="a")):
            with pytest.raises(StatePersistenceError) as caught:
                await store.put_run(record.model_copy(update={"metadata": {"blob": "é" * 1000}}))
            assert caught.value.reason == "too_large"
            assert not caught.value.retryable
        with pytest.raises(StatePersistenceError) as refused:
            await store.put_session(session.model_copy(update={"metadata": {"blob": "x" * 2000}}))
        assert refused.value.reason == "too_large"
        assert await store.get_run(kept.key) == kept
        assert await store.get_run(StateKey(tenant="t", id="fresh")) is None
        assert await store.get_session(session.key) == session
    finally:
        await database.close()


async def test_a_payload_or_checkpoint_over_max_value_bytes_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    settings = SqliteStoreSettings(path=str(tmp_path / "app.db"), max_value_bytes=2000)
    database = await connect(settings=settings)
    try:
        queue = SqliteWorkQueue(database)
        big = WorkItem(id="big", tenant="t", payload={"blob": "é" * 1000})
        for enqueue in (
            queue.enqueue,
            lambda item: database.transaction(lambda tx: queue.bound(tx).enqueue(item)),
        ):
            with pytest.raises(StatePersistenceError) as caught:
                await enqueue(big)
            assert caught.value.reason == "too_large"
        assert (await queue.stats()).depth == 0
        checkpointer = SqliteCheckpointer(database)
        durable = SqliteDurable(checkpointer, SqliteScheduler(database, lease=30))
        holder = await checkpointer.claim("wf", 30, 30)
        assert holder is not None
        await checkpointer.record(holder, "kept", "small")
        for write in (
            lambda value: checkpointer.record(holder, "step", value),
            lambda value: checkpointer.supply("wf", "input", value),
            lambda value: checkpointer.append("wf", value),
            lambda value: durable.arrive("wf", "input", value),
        ):
            with pytest.raises(StatePersistenceError) as refused:
                await write("x" * 2001)
            assert refused.value.reason == "too_large"
        assert await checkpointer.load("wf") == {"kept": "small"}
    finally:
        await database.close()
