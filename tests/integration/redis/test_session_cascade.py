"""A cascading delete_session on Redis never holds the server for long."""

from __future__ import annotations

import asyncio
from typing import Any

from durably import ManualClock, RunRecord, RunState, SessionRecord, StateKey, StateQuery
from durably.redis.state import _DELETE_BATCH, RedisStateStore
from tests.redis_service import drop_namespaces, namespace_for

RUNS = 2000
# One script over every run of the session held the server 1.7 s for 60,000 runs; batches
# of 200 take a few milliseconds each (the bound leaves room for a loaded machine).
SHORT_SCRIPT_MICROS = 50_000


async def test_a_cascading_delete_of_a_big_session_runs_in_short_scripts_and_deletes_it_all(
    redis_client: Any,
) -> None:
    ns = namespace_for(redis_client)
    store = RedisStateStore(redis_client, clock=ManualClock(), key_prefix=ns)
    tenant = "t"
    session = await store.put_session(SessionRecord(session_id="big", tenant=tenant))
    for first in range(0, RUNS, 50):
        await asyncio.gather(
            *(
                store.put_run(
                    RunRecord(
                        run_id=f"r{i}",
                        tenant=tenant,
                        agent_name="a",
                        session_id="big",
                        state=RunState.COMPLETED,
                    )
                )
                for i in range(first, first + 50)
            )
        )
    other = await store.put_run(RunRecord(run_id="elsewhere", tenant=tenant, agent_name="a"))
    previous = await redis_client.config_get("slowlog-log-slower-than")
    await redis_client.config_set("slowlog-log-slower-than", 0)  # log every command
    await redis_client.config_set("slowlog-max-len", 100_000)
    await redis_client.slowlog_reset()
    try:
        assert await store.delete_session(session.key, cascade=True) is True
        entries = await redis_client.slowlog_get(100_000)
    finally:
        await redis_client.config_set(
            "slowlog-log-slower-than", previous["slowlog-log-slower-than"]
        )
        await redis_client.slowlog_reset()
    # Only the delete runs scripts meanwhile (EVAL when a script was not loaded yet).
    calls = [entry for entry in entries if entry["command"].startswith((b"EVALSHA ", b"EVAL "))]
    assert len(calls) >= RUNS // _DELETE_BATCH  # in batches, not one script
    assert max(entry["duration"] for entry in calls) < SHORT_SCRIPT_MICROS
    assert await store.get_session(session.key) is None
    for i in (0, RUNS // 2, RUNS - 1):
        assert await store.get_run(StateKey(tenant=tenant, id=f"r{i}")) is None
    assert (await store.list_runs(StateQuery(tenant=tenant))).records == (other,)
    assert [key async for key in redis_client.scan_iter(match=f"{ns}:*session*")] == []
    await drop_namespaces(redis_client, [ns])
