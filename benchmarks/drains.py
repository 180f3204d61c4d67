"""A real `Worker` draining a filled queue, timed to its last settle: the "through a
Worker" rows of the backing sections."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from durably.engine.worker import Worker
from durably.errors import DurablyError
from durably.stores.work import WorkItem


class CountingCompletions:
    """Mixed in before a work queue class: counts its completions and sets ``drained``
    once ``target`` items are completed."""

    target = 0
    completed = 0
    drained: asyncio.Event

    async def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        item: WorkItem = await super().complete(  # type: ignore[misc]
            item_id, tenant=tenant, worker=worker
        )
        self._count(1)
        return item

    async def complete_many(
        self, items: Sequence[tuple[str, str]], *, worker: str
    ) -> list[WorkItem | DurablyError]:
        results: list[WorkItem | DurablyError] = await super().complete_many(  # type: ignore[misc]
            items, worker=worker
        )
        self._count(sum(isinstance(result, WorkItem) for result in results))
        return results

    def _count(self, completed: int) -> None:
        self.completed += completed
        if self.completed >= self.target:
            self.drained.set()


async def worker_drain(queue: Any, total: int, concurrency: int, name: str = "bench") -> float:
    """Items/s of a `Worker` at ``concurrency`` with an empty handler, from its start to the
    last of ``total`` completions of ``queue`` (a `CountingCompletions` queue)."""
    queue.target, queue.completed, queue.drained = total, 0, asyncio.Event()

    async def handler(item: WorkItem) -> None:
        return None

    worker = Worker(name=name, grace_seconds=1.0)
    worker.handle(queue, handler, concurrency=concurrency)
    started = time.perf_counter()
    serving = asyncio.create_task(worker.run(install_signal_handlers=False))
    await asyncio.wait_for(queue.drained.wait(), 120)
    elapsed = time.perf_counter() - started
    worker.stop()
    await serving
    return total / elapsed
