"""Batched claims: a batch serves tenants in the rotation single claims would, and a
`Worker` over a queue with `claim_many` fills only its free slots."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

import pytest

from durably.clock import SystemClock
from durably.engine.worker import Worker
from durably.errors import DurablyError
from durably.postgres import PostgresWorkQueue
from durably.stores.work import QueuePolicy, WorkItem
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres


async def test_a_batch_takes_one_item_of_each_tenant_in_turn_before_a_second(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    for tenant in ("a", "b", "c"):
        for n in range(3):
            await queue.enqueue(WorkItem(id=f"{tenant}{n}", tenant=tenant))
    batch = await queue.claim_many(worker="w", limit=7)
    assert Counter(item.tenant for item in batch) == {"a": 3, "b": 2, "c": 2}
    # Within a tenant, its oldest items first.
    assert sorted(item.id for item in batch if item.tenant == "b") == ["b0", "b1"]


async def test_a_batch_smaller_than_the_tenants_due_takes_the_first_tenants_in_turn(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, tables=tables))
    for tenant in ("a", "b", "c", "d", "e"):
        for n in range(2):
            await queue.enqueue(WorkItem(id=f"{tenant}{n}", tenant=tenant))
    batch = await queue.claim_many(worker="w", limit=3)
    assert sorted((item.tenant, item.id) for item in batch) == [
        ("a", "a0"),
        ("b", "b0"),
        ("c", "c0"),
    ]
    # The served tenants went to the back: the next claim serves d.
    item = await queue.claim(worker="w")
    assert item is not None
    assert item.tenant == "d"


class _Counting(PostgresWorkQueue):
    """Tracks how many items this worker holds (claimed, not yet settled) at most; a single
    claim goes through `claim_many` too."""

    held = 0
    peak = 0
    batches = 0

    async def claim_many(
        self,
        *,
        worker: str,
        queue: str = "default",
        lease_seconds: float | None = None,
        limit: int = 10,
    ) -> list[WorkItem]:
        items = await super().claim_many(
            worker=worker, queue=queue, lease_seconds=lease_seconds, limit=limit
        )
        self.batches += limit > 1
        self.held += len(items)
        self.peak = max(self.peak, self.held)
        return items

    async def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        self.held -= 1
        return await super().complete(item_id, tenant=tenant, worker=worker)

    async def complete_many(
        self, items: Sequence[tuple[str, str]], *, worker: str
    ) -> list[WorkItem | DurablyError]:
        self.held -= len(items)
        return await super().complete_many(items, worker=worker)


async def test_a_worker_claims_in_batches_but_never_holds_more_than_its_concurrency(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    queue = pg_stores.track(
        _Counting(pg_stores.pool, clock=SystemClock(), policy=QueuePolicy(), tables=tables)
    )
    for n in range(40):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant=f"t{n % 3}"))
    done: list[str] = []
    finished = asyncio.Event()

    async def handler(item: WorkItem) -> None:
        await asyncio.sleep(0.005)
        done.append(item.id)
        if len(done) == 40:
            finished.set()

    worker = Worker(name="batcher", grace_seconds=2.0)
    worker.handle(queue, handler, concurrency=4)
    serving = asyncio.create_task(worker.run(install_signal_handlers=False))
    await asyncio.wait_for(finished.wait(), 30)
    worker.stop()
    await serving
    assert sorted(done) == sorted(f"i{n}" for n in range(40))
    assert queue.batches >= 1
    assert queue.peak <= 4
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (0, 0)
