"""A delete_session of a big session on Redis never holds the server for long, cascading
or refusing while a run of it is live."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from durably import ManualClock, RunRecord, RunState, SessionRecord, StateKey
from durably.errors import StateInUseError
from durably.redis.state import _DELETE_BATCH, RedisStateStore
from durably.stores import StateQuery
from tests.redis_service import drop_namespaces, namespace_for

RUNS = 2000
# One script over every run of the session held the server 1.7 s for 60,000 runs; batches
# of 200 take a few milliseconds each (the bound leaves room for a loaded machine).
SHORT_SCRIPT_MICROS = 50_000


async def _big_session(redis_client: Any) -> tuple[str, RedisStateStore, SessionRecord]:
    """A store in a fresh namespace and a session "big" of tenant "t" with RUNS completed
    runs, named r0, r1, ... in creation order."""
    ns = namespace_for(redis_client)
    store = RedisStateStore(redis_client, clock=ManualClock(), key_prefix=ns)
    session = await store.put_session(SessionRecord(session_id="big", tenant="t"))
    await _fill(store, "t", "big")
    return ns, store, session


async def _fill(store: RedisStateStore, tenant: str, session: str) -> None:
    for first in range(0, RUNS, 50):
        await asyncio.gather(
            *(
                store.put_run(
                    RunRecord(
                        run_id=f"r{i}",
                        tenant=tenant,
                        agent_name="a",
                        session_id=session,
                        state=RunState.COMPLETED,
                    )
                )
                for i in range(first, first + 50)
            )
        )


@asynccontextmanager
async def _scripts_logged(redis_client: Any) -> AsyncIterator[list[dict[str, Any]]]:
    """The scripts the server ran inside the block, from its SLOWLOG (EVAL when a script
    was not loaded yet), in the list yielded once the block ends."""
    calls: list[dict[str, Any]] = []
    previous = await redis_client.config_get("slowlog-log-slower-than")
    await redis_client.config_set("slowlog-log-slower-than", 0)  # log every command
    await redis_client.config_set("slowlog-max-len", 100_000)
    await redis_client.slowlog_reset()
    try:
        yield calls
        entries = await redis_client.slowlog_get(100_000)
    finally:
        await redis_client.config_set(
            "slowlog-log-slower-than", previous["slowlog-log-slower-than"]
        )
        await redis_client.slowlog_reset()
    calls += [e for e in entries if e["command"].startswith((b"EVALSHA ", b"EVAL "))]


async def test_a_cascading_delete_of_a_big_session_runs_in_short_scripts_and_deletes_it_all(
    redis_client: Any,
) -> None:
    ns, store, session = await _big_session(redis_client)
    tenant = session.tenant
    other = await store.put_run(RunRecord(run_id="elsewhere", tenant=tenant, agent_name="a"))
    async with _scripts_logged(redis_client) as calls:
        assert await store.delete_session(session.key, cascade=True) is True
    assert len(calls) >= RUNS // _DELETE_BATCH  # in batches, not one script
    assert max(entry["duration"] for entry in calls) < SHORT_SCRIPT_MICROS
    assert await store.get_session(session.key) is None
    for i in (0, RUNS // 2, RUNS - 1):
        assert await store.get_run(StateKey(tenant=tenant, id=f"r{i}")) is None
    assert (await store.list_runs(StateQuery(tenant=tenant))).records == (other,)
    assert [key async for key in redis_client.scan_iter(match=f"{ns}:*session*")] == []
    await drop_namespaces(redis_client, [ns])


async def test_a_delete_without_cascade_of_a_big_session_runs_in_short_scripts(
    redis_client: Any,
) -> None:
    ns, store, session = await _big_session(redis_client)
    tenant = session.tenant
    live = []
    for run_id in ("late b", "late a"):
        live.append(
            await store.put_run(
                RunRecord(run_id=run_id, tenant=tenant, agent_name="a", session_id="big")
            )
        )
    async with _scripts_logged(redis_client) as refusing:
        with pytest.raises(StateInUseError) as refused:
            await store.delete_session(session.key)
    assert refused.value.live_runs == ("late b", "late a")  # in creation order
    for run in live:
        await store.put_run(run.model_copy(update={"state": RunState.COMPLETED}))
    async with _scripts_logged(redis_client) as deleting:
        assert await store.delete_session(session.key) is True
    for calls in (refusing, deleting):
        assert len(calls) > 2  # in steps, not one script over every run
        assert max(entry["duration"] for entry in calls) < SHORT_SCRIPT_MICROS
    assert await store.get_session(session.key) is None
    assert await store.get_run(StateKey(tenant=tenant, id="r0")) is not None
    await drop_namespaces(redis_client, [ns])
