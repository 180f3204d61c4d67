"""`SplitDurable` composes any checkpointer and scheduler: records first, then queues."""

from __future__ import annotations

from typing import Any

import pytest

from durably.memory import MemoryCheckpointer, MemoryEffect, MemoryScheduler
from durably.stores.workflows import Delivery, Durable, SplitDurable
from durably.testing import DurableConformance
from durably.testing.durable import DurableFactory


class BrokenScheduler(MemoryScheduler):
    """A scheduler whose datastore is down for every write."""

    async def make_ready(
        self, workflow: str, *, tenant: str | None = None, priority: int | None = None
    ) -> None:
        raise ConnectionError("scheduler unavailable")

    async def cancel(self, workflow: str) -> None:
        raise ConnectionError("scheduler unavailable")

    async def wake_at(self, delivery: Delivery, when: float) -> None:
        raise ConnectionError("scheduler unavailable")


@pytest.fixture
def durable_factory() -> DurableFactory:
    async def make() -> Durable[Any]:
        return SplitDurable[MemoryEffect](MemoryCheckpointer(), MemoryScheduler())

    return make


class TestSplitDurableOverMemoryStores(DurableConformance):
    pass


async def test_arrive_records_before_it_queues() -> None:
    checkpointer = MemoryCheckpointer()
    durable = SplitDurable[MemoryEffect](checkpointer, BrokenScheduler())
    with pytest.raises(ConnectionError):
        await durable.arrive("w", "input", 1)
    with pytest.raises(ConnectionError):
        await durable.deliver("w", "message")
    loaded = await checkpointer.load("w")
    assert list(loaded.values()) == [1, "message"]


async def test_asking_again_repairs_a_lost_wakeup_without_changing_the_value() -> None:
    checkpointer = MemoryCheckpointer()
    broken = SplitDurable[MemoryEffect](checkpointer, BrokenScheduler())
    with pytest.raises(ConnectionError):
        await broken.arrive("w", "input", 1)
    scheduler = MemoryScheduler()
    repaired = SplitDurable[MemoryEffect](checkpointer, scheduler)
    again = await repaired.arrive("w", "input", 2)
    assert (again.value, again.first) == (1, False)
    delivery = await scheduler.next_ready(0)
    assert delivery is not None
    assert delivery.workflow == "w"


async def test_delete_cancels_before_it_discards() -> None:
    checkpointer = MemoryCheckpointer()
    await checkpointer.supply("w", "input", 1)
    durable = SplitDurable[MemoryEffect](checkpointer, BrokenScheduler())
    with pytest.raises(ConnectionError):
        await durable.delete("w")
    assert await checkpointer.load("w") == {"input": 1}


def test_split_durable_exposes_both_stores() -> None:
    checkpointer, scheduler = MemoryCheckpointer(), MemoryScheduler()
    durable = SplitDurable[MemoryEffect](checkpointer, scheduler)
    assert durable.checkpointer is checkpointer
    assert durable.scheduler is scheduler
