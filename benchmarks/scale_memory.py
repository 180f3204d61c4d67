"""The scale table's memory rows (see benchmarks.scale): each size in a fresh
`MemoryWorkQueue`, filled through its own enqueue. The floor is a plain `heapq` of ids:
claimed by a pop into a set of taken ids, completed by removing the id from that set."""

from __future__ import annotations

import asyncio
import heapq

from benchmarks import scale
from durably.clock import SystemClock
from durably.memory import MemoryWorkQueue
from durably.stores.work import QueuePolicy, WorkItem


class _Floor:
    """The least a claim+complete of an in-process queue can cost: a heap pop, a set add
    and a set remove."""

    def __init__(self, items: int) -> None:
        self._free = list(range(items))
        heapq.heapify(self._free)
        self._taken: set[int] = set()

    async def claim(self) -> object:
        job = heapq.heappop(self._free)
        self._taken.add(job)
        return job

    async def complete(self, job: object) -> None:
        assert isinstance(job, int)
        self._taken.remove(job)


async def _size(items: int, tenants: int) -> scale.Sample:
    queue = MemoryWorkQueue(SystemClock(), QueuePolicy(lease_seconds=60))
    for n in range(items):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n % tenants}"))
    floor = _Floor(items)
    return await scale.timed(queue, floor.claim, floor.complete)


def table() -> list[list[scale.Row]]:
    return scale.run(lambda items, tenants: asyncio.run(_size(items, tenants)))
