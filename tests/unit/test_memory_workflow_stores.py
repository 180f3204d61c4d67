"""Memory checkpointer and scheduler edges, on an injected store clock (no real waits)."""

from __future__ import annotations

import asyncio

import pytest

from durably.clock import ManualClock
from durably.errors import Fenced
from durably.memory import MemoryCheckpointer, MemoryDurable, MemoryEffectKit, MemoryScheduler
from durably.stores.workflows import Checkpointer, Durable, Pass, Scheduler


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(100.0)


@pytest.fixture
def cp(clock: ManualClock) -> MemoryCheckpointer:
    return MemoryCheckpointer(now=clock.now)


async def test_a_claim_is_free_exactly_when_its_alive_window_ends(
    cp: MemoryCheckpointer, clock: ManualClock
) -> None:
    first = await cp.claim("w", 10, 2)
    clock.advance(1.999)
    assert await cp.claim("w", 10, 2) is None
    clock.advance(0.001)
    second = await cp.claim("w", 10, 2)
    assert second == Pass("w", 2)
    assert first == Pass("w", 1)


async def test_renew_is_false_exactly_when_the_budget_is_spent(
    cp: MemoryCheckpointer, clock: ManualClock
) -> None:
    holder = await cp.claim("w", 3, 1)
    assert holder is not None
    for _ in range(2):
        clock.advance(0.9)
        assert await cp.renew(holder, 1)
    clock.advance(0.9)  # 2.7 s: the window is capped at the budget's end, 3 s
    assert await cp.renew(holder, 5)
    clock.advance(0.299)
    assert await cp.claim("w", 1, 1) is None
    clock.advance(0.001)
    assert not await cp.renew(holder, 1)
    assert await cp.claim("w", 1, 1) is not None


async def test_a_write_renews_for_the_claims_own_alive_window(
    cp: MemoryCheckpointer, clock: ManualClock
) -> None:
    holder = await cp.claim("w", 10, 2)
    assert holder is not None
    clock.advance(1.5)
    await cp.record(holder, "k", 1)
    clock.advance(1.5)
    assert await cp.claim("w", 10, 2) is None
    clock.advance(0.5)
    assert await cp.claim("w", 10, 2) is not None


async def test_a_record_after_release_does_not_revive_the_claim(
    cp: MemoryCheckpointer, clock: ManualClock
) -> None:
    holder = await cp.claim("w", 10, 10)
    assert holder is not None
    await cp.release(holder)
    assert (await cp.record(holder, "k", 1)).first
    assert await cp.claim("w", 10, 10) == Pass("w", 2)


async def test_discard_of_a_never_claimed_workflow_deletes_its_supplied_records(
    cp: MemoryCheckpointer,
) -> None:
    await cp.supply("w", "a", 1)
    await cp.append("w", 2)
    assert await cp.discard("w") == 2
    assert await cp.claim("w", 1, 1) == Pass("w", 1)


async def test_transact_commits_into_data_and_keeps_its_identity(cp: MemoryCheckpointer) -> None:
    kit = MemoryEffectKit(cp)
    data = cp.data
    holder = await cp.claim("w", 10, 10)
    assert holder is not None
    await cp.transact(holder, "k", kit.bump("paid", "ok"))
    assert cp.data is data
    assert data == {"paid": 1}
    assert await kit.count("paid") == 1


async def test_a_failing_effect_leaves_nested_data_untouched(cp: MemoryCheckpointer) -> None:
    cp.data["ledger"] = {"entries": [1]}
    holder = await cp.claim("w", 10, 10)
    assert holder is not None

    def effect(data: dict[str, object]) -> object:
        ledger = data["ledger"]
        assert isinstance(ledger, dict)
        ledger["entries"].append(2)
        raise RuntimeError("declined")

    with pytest.raises(RuntimeError):
        await cp.transact(holder, "k", effect)
    assert cp.data == {"ledger": {"entries": [1]}}


async def test_a_value_the_codec_refuses_leaves_neither_record_nor_effect(
    cp: MemoryCheckpointer,
) -> None:
    holder = await cp.claim("w", 10, 10)
    assert holder is not None
    kit = MemoryEffectKit(cp)
    with pytest.raises(ValueError):
        await cp.transact(holder, "k", kit.bump("paid", float("nan")))
    assert await kit.count("paid") == 0
    assert await cp.load("w") == {}


async def test_a_superseded_transact_runs_nothing(
    cp: MemoryCheckpointer, clock: ManualClock
) -> None:
    old = await cp.claim("w", 10, 1)
    assert old is not None
    clock.advance(1)
    assert await cp.claim("w", 10, 1) is not None
    kit = MemoryEffectKit(cp)
    with pytest.raises(Fenced):
        await cp.transact(old, "k", kit.bump("paid", 1))
    assert cp.data == {}


async def test_a_delivery_comes_back_exactly_when_its_lease_ends(clock: ManualClock) -> None:
    scheduler = MemoryScheduler(lease=5, now=clock.now)
    await scheduler.make_ready("w")
    first = await scheduler.next_ready(0)
    assert first is not None
    clock.advance(4.999)
    assert await scheduler.next_ready(0) is None
    clock.advance(0.001)
    second = await scheduler.next_ready(0)
    assert second is not None
    assert second.receipt != first.receipt


async def test_reclaim_names_only_deliveries_idle_long_enough(clock: ManualClock) -> None:
    scheduler = MemoryScheduler(lease=60, now=clock.now)
    await scheduler.make_ready("old")
    assert await scheduler.next_ready(0) is not None
    clock.advance(10)
    await scheduler.make_ready("young")
    assert await scheduler.next_ready(0) is not None
    assert await scheduler.reclaim(10.001) == []
    assert await scheduler.reclaim(10) == ["old"]


async def test_several_waiting_takers_each_wake_for_their_own_workflow() -> None:
    scheduler = MemoryScheduler(lease=60)
    waiters = [asyncio.create_task(scheduler.next_ready(5)) for _ in range(3)]
    await asyncio.sleep(0.01)
    for workflow in ("w", "v", "u"):
        await scheduler.make_ready(workflow)
    results = await asyncio.wait_for(asyncio.gather(*waiters), 2)
    assert sorted(d.workflow for d in results if d is not None) == ["u", "v", "w"]


def test_the_scheduler_refuses_a_non_positive_lease_and_an_empty_namespace() -> None:
    with pytest.raises(ValueError):
        MemoryScheduler(lease=0)
    with pytest.raises(ValueError):
        MemoryScheduler(namespace="")


def test_the_memory_stores_satisfy_the_workflow_protocols() -> None:
    checkpointer, scheduler = MemoryCheckpointer(), MemoryScheduler()
    assert isinstance(checkpointer, Checkpointer)
    assert isinstance(scheduler, Scheduler)
    assert isinstance(MemoryDurable(checkpointer, scheduler), Durable)
