"""Kept dedupe keys and flow gates on one item, on every backing: a gated item enqueued
with a ``dedupe_ttl`` (alone and in a batch) is gated while it runs, and once it finished
an enqueue of its key is answered with the finished item, gates included."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from durably import ManualClock, Throttle
from durably.stores import Stores, open_stores
from durably.stores.work import WorkItem, WorkState, flow_fields

START = 1_000_000.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock
) -> AsyncIterator[Stores]:
    from tests.redis_service import durable_server

    dsn = {
        "memory": "memory://",
        "sqlite": f"sqlite:///{tmp_path / 'queue.db'}",
        "redis": durable_server().url if request.param == "redis" else "",
    }.get(request.param) or str(request.getfixturevalue("postgres_dsn"))
    opened = await open_stores(dsn, clock=clock)
    await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.mark.parametrize("batched", [False, True])
async def test_a_gated_item_with_a_kept_key_is_gated_then_answers_its_key(
    stores: Stores, clock: ManualClock, batched: bool
) -> None:
    tenant, queue = f"t-{uuid.uuid4().hex[:10]}", f"q-{uuid.uuid4().hex[:10]}"
    gates = flow_fields(
        concurrency_key="acct",
        concurrency_limit=1,
        throttle=Throttle(1000),
        throttle_key="partner",
    )
    made = [
        WorkItem(id=f"i{n}", tenant=tenant, queue=queue, dedupe_key=f"k{n}", **gates)
        for n in range(2)
    ]
    work = stores.queue
    if batched:
        await work.enqueue_many(made, dedupe_ttl=3600.0)
    else:
        for item in made:
            await work.enqueue(item, dedupe_ttl=3600.0)
    first = await work.claim(worker="w", queue=queue)
    assert first is not None
    assert first.concurrency_key == "acct"
    clock.advance(1)  # the throttle lets the next through: only the concurrency key holds
    assert await work.claim(worker="w", queue=queue) is None  # the key's one slot is taken
    await work.complete(first.id, tenant=tenant, worker="w")
    again = await work.enqueue(
        WorkItem(id="other", tenant=tenant, queue=queue, dedupe_key=first.dedupe_key, **gates),
        dedupe_ttl=3600.0,
    )
    assert (again.id, again.state) == (first.id, WorkState.COMPLETED)
    assert (again.concurrency_key, again.concurrency_limit) == ("acct", 1)
    assert (again.throttle_key, again.throttle_burst) == ("partner", 1)
    clock.advance(1)
    second = await work.claim(worker="w", queue=queue)  # the slot is free again
    assert second is not None
    assert second.id == "i1"


def test_a_postgres_item_kept_before_gates_reads_as_ungated() -> None:
    from durably.postgres.queue import _kept_item

    # The row of a finished item as a store kept it before items had gates: 15 columns.
    row = ["t", "i", "q", "{}", 20, "k", 1, "completed", "w", 1.0, 1.0, None, 2.0, 2.0, "[]"]
    item = _kept_item(row)
    assert (item.id, item.state, item.dedupe_key) == ("i", WorkState.COMPLETED, "k")
    assert (item.concurrency_key, item.throttle_key, item.throttle_seconds) == (None,) * 3
