"""The Worker's batching over the memory backing: settles of items finishing together go in
one `complete_many`, and a busy worker gathers free slots before a batched claim."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from durably import WorkItem
from durably.errors import DurablyError
from durably.memory import MemoryWorkQueue
from durably.worker import Worker
from tests.unit.test_worker import eventually, quick, serving


class _Batching(MemoryWorkQueue):
    """A memory queue recording every batched call it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: list[int] = []  # the limit of each claim_many
        self.completions: list[int] = []  # the size of each complete_many

    async def claim_many(
        self,
        *,
        worker: str,
        queue: str = "default",
        lease_seconds: float | None = None,
        limit: int = 10,
    ) -> list[WorkItem]:
        self.claims.append(limit)
        return await super().claim_many(
            worker=worker, queue=queue, lease_seconds=lease_seconds, limit=limit
        )

    async def complete_many(
        self, items: Sequence[tuple[str, str]], *, worker: str
    ) -> list[WorkItem | DurablyError]:
        self.completions.append(len(items))
        return await super().complete_many(items, worker=worker)


async def _gated(queue: _Batching, worker: Worker, count: int) -> dict[str, asyncio.Event]:
    gates = {f"i{n}": asyncio.Event() for n in range(count)}
    for item_id in gates:
        await queue.enqueue(WorkItem(id=item_id, tenant="t"))

    async def handler(item: WorkItem) -> None:
        await gates[item.id].wait()

    worker.handle(queue, handler, concurrency=10)
    return gates


async def test_items_finishing_together_are_completed_in_one_batched_call() -> None:
    queue = _Batching()
    worker = quick(name="batcher")
    gates = await _gated(queue, worker, 10)
    async with serving(worker):
        await eventually(lambda: len(queue.claims) == 1)
        for gate in gates.values():
            gate.set()
        await eventually(lambda: sum(queue.completions) == 10)
    assert len(queue.completions) < 10
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (0, 0)


async def test_a_busy_worker_refills_half_its_slots_in_one_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("durably.serving.GATHER_SECONDS", 5.0)  # gathering, never timing out
    queue = _Batching()
    worker = quick(name="refiller")
    gates = await _gated(queue, worker, 20)
    async with serving(worker):
        await eventually(lambda: queue.claims == [10])
        first = [f"i{n}" for n in range(10)]
        for item_id in first[:4]:  # four slots free: too few to claim for yet
            gates[item_id].set()
        await eventually(lambda: sum(queue.completions) == 4)
        await asyncio.sleep(0.05)
        assert queue.claims == [10]
        gates[first[4]].set()  # the fifth: half the slots are free
        await eventually(lambda: queue.claims == [10, 5])
        for gate in gates.values():
            gate.set()
        await eventually(lambda: sum(queue.completions) == 20)
