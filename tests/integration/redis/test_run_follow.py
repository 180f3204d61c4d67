"""The run record following a workflow on Redis, on a server and a cluster: found through
its tenant's hash of following runs, which the run's own writes keep, and moved by the
step each status write runs in the tenant's slot, never back to an older status."""

from __future__ import annotations

from typing import Any

import pytest

from durably.redis import RedisCheckpointer, RedisStateStore, keys
from durably.stores.admission import TenantCaps
from durably.stores.catalog import CatalogEntry
from durably.stores.runs import FOLLOWS, RunRecord, RunState, SessionRecord, StateKey
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Pass
from tests.redis_service import namespace_for

pytestmark = pytest.mark.asyncio

TENANT = "acme"


class Killed(Exception):
    """The process died here."""


def _stores(client: Any) -> tuple[RedisCheckpointer, RedisStateStore, str]:
    ns = namespace_for(client)
    return RedisCheckpointer(client, key_prefix=ns), RedisStateStore(client, key_prefix=ns), ns


async def _started(checkpointer: RedisCheckpointer, state: RedisStateStore, workflow: str) -> Pass:
    """An App's start of ``workflow`` (admitted, catalogued, its run opened), claimed."""
    await checkpointer.admit(workflow, "start", {}, tenant=TENANT, caps=TenantCaps())
    await checkpointer.catalog(workflow, CatalogEntry(TENANT, "kind", 1))
    await state.put_run(_run(workflow))
    holder = await checkpointer.claim(workflow, 30, 30)
    assert holder is not None
    return holder


def _run(workflow: str, follows: str | None = None) -> RunRecord:
    metadata = {FOLLOWS: workflow if follows is None else follows} if follows != "" else {}
    return RunRecord(run_id=workflow, tenant=TENANT, agent_name="kind", metadata=metadata)


async def _stored(state: RedisStateStore, run_id: str) -> RunRecord:
    run = await state.get_run(StateKey(tenant=TENANT, id=run_id))
    assert run is not None
    return run


async def _state(state: RedisStateStore, run_id: str) -> RunState:
    return (await _stored(state, run_id)).state


async def _by_state(state: RedisStateStore) -> dict[RunState, int]:
    (totals,) = await state.tenant_totals([TENANT])
    return {s: n for s, n in totals.by_state.items() if n}


async def _following(client: Any, ns: str) -> dict[str, str]:
    found = await client.hgetall(keys.followed_runs_key(ns, TENANT))
    return {k.decode(): v.decode() for k, v in found.items()}


async def test_a_late_step_of_an_older_status_leaves_the_run_where_the_newer_one_put_it(
    any_redis: Any,
) -> None:
    checkpointer, state, _ = _stores(any_redis)
    holder = await _started(checkpointer, state, "w")
    running = await checkpointer.set_status(holder, WorkflowStatus.RUNNING)
    await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
    assert await _state(state, "w") is RunState.COMPLETED
    version = (await _stored(state, "w")).version

    at_us = str(round(running.updated_at.timestamp() * 1_000_000))
    await checkpointer._indexing.step("w", WorkflowStatus.RUNNING, at_us, tenant=TENANT)

    assert await _state(state, "w") is RunState.COMPLETED
    assert (await _stored(state, "w")).version == version
    assert await _by_state(state) == {RunState.COMPLETED: 1}


async def test_a_status_write_whose_steps_died_moves_its_run_when_the_repair_brings_them(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer, state, _ = _stores(any_redis)
    holder = await _started(checkpointer, state, "w")
    indexing = checkpointer._indexing

    async def died(*args: Any, **kwargs: Any) -> None:
        raise Killed

    monkeypatch.setattr(indexing, "step", died)
    with pytest.raises(Killed):
        await checkpointer.set_status(holder, WorkflowStatus.BLOCKED)
    monkeypatch.undo()
    assert await _state(state, "w") is RunState.PENDING

    assert await checkpointer.repair_catalog(limit=10, grace=0) == 1

    assert await _state(state, "w") is RunState.SUSPENDED
    assert await _by_state(state) == {RunState.SUSPENDED: 1}
    assert await checkpointer.repair_catalog(limit=10, grace=0) == 0


async def test_the_tenants_hash_of_following_runs_is_kept_by_the_runs_own_writes(
    any_redis: Any,
) -> None:
    checkpointer, state, ns = _stores(any_redis)
    for workflow in ("a", "b", "c"):
        await state.put_run(_run(workflow))
    assert await _following(any_redis, ns) == {"a": "a", "b": "b", "c": "c"}

    version = (await _stored(state, "a")).version
    await state.put_run(_run("a", follows="other").model_copy(update={"version": version}))
    await state.delete_run(StateKey(tenant=TENANT, id="b"))
    assert await _following(any_redis, ns) == {"other": "a", "c": "c"}

    # A workflow whose run is gone, or follows another, moves nothing.
    for workflow in ("a", "b"):
        await checkpointer.admit(workflow, "start", {}, tenant=TENANT, caps=TenantCaps())
        await checkpointer.catalog(workflow, CatalogEntry(TENANT, "kind", 1))
        holder = await checkpointer.claim(workflow, 30, 30)
        assert holder is not None
        await checkpointer.set_status(holder, WorkflowStatus.RUNNING)
    assert await _state(state, "a") is RunState.PENDING
    assert await state.get_run(StateKey(tenant=TENANT, id="b")) is None
    assert await _by_state(state) == {RunState.PENDING: 2}


async def test_a_cascading_session_delete_takes_its_runs_out_of_the_following_hash(
    any_redis: Any,
) -> None:
    _, state, ns = _stores(any_redis)
    await state.put_session(SessionRecord(session_id="s", tenant=TENANT))
    for workflow in ("a", "b"):
        await state.put_run(_run(workflow).model_copy(update={"session_id": "s"}))
    await state.put_run(_run("c"))
    await state.delete_session(StateKey(tenant=TENANT, id="s"), cascade=True)
    assert await _following(any_redis, ns) == {"c": "c"}
