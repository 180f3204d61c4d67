"""Redis's batched calls run their batch in scripts of several items each: a batched claim
takes what as many single claims would, across scripts and around promotions, a batched
completion answers per item across scripts, and a catalog batch enters what single calls
do, and a batched look and cancel answer each workflow; all survive a flushed script
cache."""

from __future__ import annotations

from typing import Any

import pytest

from durably import ManualClock, WorkItem, WorkState
from durably.errors import LeaseLostError
from durably.redis import RedisCheckpointer, RedisWorkQueue
from durably.stores.cancelling import CancelAsk
from durably.stores.catalog import CatalogEntry, Line
from durably.stores.status import WorkflowStatus
from tests.redis_service import namespace_for

pytestmark = pytest.mark.redis


async def _filled(client: Any, clock: ManualClock) -> RedisWorkQueue:
    """60 items of 5 tenants, a tenant's items a second apart, tenants in turn."""
    queue = RedisWorkQueue(client, clock=clock, key_prefix=namespace_for(client))
    for n in range(60):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n % 5}", queue="q"))
        clock.advance(0.2)
    return queue


async def test_a_batch_of_forty_spans_scripts_and_takes_what_forty_single_claims_take(
    any_redis: Any,
) -> None:
    batched = await _filled(any_redis, ManualClock(1000.0))
    single = await _filled(any_redis, ManualClock(1000.0))
    taken = await batched.claim_many(worker="w", queue="q", limit=40)
    one_by_one = [await single.claim(worker="w", queue="q") for _ in range(40)]
    assert [item.id for item in taken] == [item.id for item in one_by_one if item]
    assert {item.state for item in taken} == {WorkState.CLAIMED}
    rest = await batched.claim_many(worker="w", queue="q", limit=40)
    assert len(rest) == 20
    assert len({item.id for item in [*taken, *rest]}) == 60


async def test_a_batch_stops_after_a_claim_that_promoted_delayed_tenants(
    any_redis: Any,
) -> None:
    clock = ManualClock(1000.0)
    queue = RedisWorkQueue(any_redis, clock=clock, key_prefix=namespace_for(any_redis))
    for n in range(3):
        await queue.enqueue(WorkItem(id=f"now{n}", tenant="a", queue="q"))
    for tenant in ("b", "c"):
        await queue.enqueue(
            WorkItem(id=f"later-{tenant}", tenant=tenant, queue="q", available_at=1005.0)
        )
    assert [i.id for i in await queue.claim_many(worker="w", queue="q", limit=2)] == [
        "now0",
        "now1",
    ]
    clock.advance(10)  # b and c are due: the next claim promotes them
    first = await queue.claim_many(worker="w", queue="q", limit=10)
    assert len(first) == 1  # the promoting claim ends its script
    rest = await queue.claim_many(worker="w", queue="q", limit=10)
    taken = [item.id for item in [*first, *rest]]
    assert sorted(taken) == ["later-b", "later-c", "now2"]
    assert await queue.claim_many(worker="w", queue="q", limit=10) == []


async def test_a_batch_of_completions_spans_scripts_and_answers_each_in_order(
    any_redis: Any,
) -> None:
    clock = ManualClock(1000.0)
    queue = await _filled(any_redis, clock)
    mine = await queue.claim_many(worker="w", queue="q", limit=55)
    theirs = await queue.claim(worker="other", queue="q")
    assert theirs is not None
    pairs = [(item.id, item.tenant) for item in mine]
    pairs.insert(30, (theirs.id, theirs.tenant))
    results = await queue.complete_many(pairs, worker="w")
    assert len(results) == 56
    lost = results.pop(30)
    assert isinstance(lost, LeaseLostError)
    assert lost.holder == "other"
    assert [(r.id, r.state) for r in results if isinstance(r, WorkItem)] == [
        (item.id, WorkState.COMPLETED) for item in mine
    ]
    stats = await queue.stats(queue="q")
    assert (stats.depth, stats.claimed) == (4, 1)


async def test_batched_calls_load_their_scripts_again_after_a_flush(any_redis: Any) -> None:
    clock = ManualClock(1000.0)
    queue = await _filled(any_redis, clock)
    await any_redis.script_flush()
    taken = await queue.claim_many(worker="w", queue="q", limit=20)
    assert len(taken) == 20
    await any_redis.script_flush()
    results = await queue.complete_many([(i.id, i.tenant) for i in taken], worker="w")
    assert [getattr(r, "state", r) for r in results] == [WorkState.COMPLETED] * 20


async def test_a_catalog_batch_spans_scripts_survives_a_flush_and_enters_as_single_calls(
    any_redis: Any,
) -> None:
    batched = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    single = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    entries = [
        (f"w{n}", CatalogEntry(f"t{n % 7}", f"k{n % 3}", 1000 + n, "w0" if n % 5 else None))
        for n in range(250)  # three scripts' worth
    ]
    await batched.catalog("w3", CatalogEntry("kept", "kept", 7))  # already there: kept
    await single.catalog("w3", CatalogEntry("kept", "kept", 7))
    await any_redis.script_flush()
    await batched.catalog_many(entries)
    for workflow, entry in entries:
        await single.catalog(workflow, entry)
    for line in (
        Line(),
        Line(tenant="t2"),
        Line(kind="k1"),
        Line(parent="w0"),
        Line(tenant="kept"),
    ):
        rows = await batched.listed(line, limit=1000)
        assert [(r.workflow, r.entry, r.status) for r in rows] == [
            (r.workflow, r.entry, r.status) for r in await single.listed(line, limit=1000)
        ], line
    assert len(await batched.listed(Line(), limit=1000)) == 250
    assert await batched.tally() == await single.tally()
    assert await batched.tally(tenant="t2") == await single.tally(tenant="t2")


async def test_a_batched_look_and_cancel_survive_a_flush(any_redis: Any) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    workflows = [f"c{n}" for n in range(30)]  # spread over the slots of a cluster
    for workflow in workflows:
        await checkpointer.supply(workflow, "start", {"n": workflow})
    await any_redis.script_flush()
    looked = await checkpointer.look_many(workflows, ["start"])
    assert [found.records for found in looked] == [{"start": {"n": w}} for w in workflows]
    await any_redis.script_flush()
    asks = [CancelAsk(w, "cancel#1", "asked", "cancelled#1", "resume#2") for w in workflows]
    outcomes = await checkpointer.cancel_many(asks)
    assert [(o.first, o.ended) for o in outcomes] == [(True, True)] * len(workflows)
    for workflow in workflows:
        info = await checkpointer.get_status(workflow)
        assert info is not None
        assert info.status is WorkflowStatus.CANCELLED
