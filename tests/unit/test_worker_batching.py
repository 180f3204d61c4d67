"""The Worker's batching over the memory backing: settles of items finishing together go in
one `complete_many`, and a busy worker gathers free slots before a batched claim."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from durably import WorkItem
from durably.engine.worker import Worker
from durably.errors import DurablyError
from durably.memory import MemoryWorkQueue
from durably.stores import QueuePolicy
from tests.unit.test_worker import eventually, quick, serving


class _Batching(MemoryWorkQueue):
    """A memory queue recording every batched call it answers, served as a queue without
    `complete_and_claim` is (PostgreSQL's, SQLite's): only the claim loop claims."""

    complete_and_claim = None  # type: ignore[assignment]

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
    monkeypatch.setattr(
        "durably.engine.queue_service.GATHER_SECONDS", 5.0
    )  # gathering, never timing out
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


class _Refilling(MemoryWorkQueue):
    """A memory queue that claims with its completions, recording what it holds."""

    def __init__(self) -> None:
        super().__init__(policy=QueuePolicy(backoff_seconds=0.01))
        self.claims: list[int] = []  # the limit of each claim_many
        self.refills: list[tuple[int, int]] = []  # (completions, items claimed) of each call
        self.held = 0
        self.peak = 0
        self._refilling = False

    async def claim(
        self, *, worker: str, queue: str = "default", lease_seconds: float | None = None
    ) -> WorkItem | None:
        item = await super().claim(worker=worker, queue=queue, lease_seconds=lease_seconds)
        if item is not None:
            self.held += 1
            self.peak = max(self.peak, self.held)
        return item

    async def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        done = await super().complete(item_id, tenant=tenant, worker=worker)
        self.held -= 1
        return done

    async def fail(
        self,
        item_id: str,
        *,
        tenant: str,
        worker: str,
        error: str,
        retryable: bool = True,
        retry_at: float | None = None,
    ) -> WorkItem:
        failed = await super().fail(
            item_id,
            tenant=tenant,
            worker=worker,
            error=error,
            retryable=retryable,
            retry_at=retry_at,
        )
        self.held -= 1
        return failed

    async def claim_many(
        self,
        *,
        worker: str,
        queue: str = "default",
        lease_seconds: float | None = None,
        limit: int = 10,
    ) -> list[WorkItem]:
        if not self._refilling:
            self.claims.append(limit)
        return await super().claim_many(
            worker=worker, queue=queue, lease_seconds=lease_seconds, limit=limit
        )

    async def complete_and_claim(
        self,
        items: Sequence[tuple[str, str]],
        *,
        worker: str,
        queue: str = "default",
        limit: int,
        lease_seconds: float | None = None,
    ) -> tuple[list[WorkItem | DurablyError], list[WorkItem]]:
        self._refilling = True  # its claim_many is not the claim loop's
        try:
            done, taken = await super().complete_and_claim(
                items, worker=worker, queue=queue, limit=limit, lease_seconds=lease_seconds
            )
        finally:
            self._refilling = False
        self.refills.append((len(items), len(taken)))
        return done, taken


async def test_completions_refill_their_own_slots_in_the_same_call() -> None:
    queue = _Refilling()
    for n in range(40):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n % 3}"))
    handled: list[str] = []

    async def handler(item: WorkItem) -> None:
        await asyncio.sleep(0.002 * (len(handled) % 3))
        handled.append(item.id)

    worker = quick(name="refiller")
    worker.handle(queue, handler, concurrency=4)
    async with serving(worker):
        await eventually(lambda: len(handled) == 40)
        await eventually(lambda: queue.held == 0)
    assert sorted(handled) == sorted(f"i{n}" for n in range(40))
    # The claim loop takes half the slots at a time; the completions take the rest.
    assert queue.claims
    assert max(queue.claims) <= 2
    assert sum(taken for _, taken in queue.refills) >= 30
    assert all(taken <= completed <= 2 for completed, taken in queue.refills)
    assert queue.peak <= 4
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (0, 0)


async def test_a_slot_whose_item_failed_is_refilled_by_the_claim_loop() -> None:
    queue = _Refilling()
    for n in range(12):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant="t"))
    handled: list[str] = []

    async def handler(item: WorkItem) -> None:
        handled.append(item.id)
        if item.id == "i3" and item.attempts == 0:
            raise RuntimeError("fails once")

    worker = quick(name="refiller")
    worker.handle(queue, handler, concurrency=2)
    async with serving(worker):
        await eventually(lambda: len(handled) == 13)
        await eventually(lambda: queue.held == 0)
    assert sorted(set(handled)) == sorted(f"i{n}" for n in range(12))
    assert handled.count("i3") == 2
    assert queue.peak <= 2
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (0, 0)


async def test_a_stop_claims_nothing_more_with_the_last_completions() -> None:
    queue = _Refilling()
    for n in range(60):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant="t"))
    handled: list[str] = []

    async def handler(item: WorkItem) -> None:
        await asyncio.sleep(0.005)
        handled.append(item.id)

    worker = quick(name="refiller", grace_seconds=5.0)
    worker.handle(queue, handler, concurrency=4)
    async with serving(worker):
        await eventually(lambda: len(handled) >= 12)
    # Every item handled was completed once; the rest wait, none held.
    assert len(handled) == len(set(handled))
    assert len(handled) < 60
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (60 - len(handled), 0)
