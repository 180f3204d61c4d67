"""The tokens that let a retried enqueue find the item it wrote are kept for a while, then
forgotten by `reap` (the table never grows with the queue's history)."""

from __future__ import annotations

import pytest

from durably import ManualClock, WorkItem
from durably.postgres import PostgresWorkQueue
from durably.postgres.executor import database_for
from durably.postgres.queue import ENQUEUE_TOKEN_SECONDS
from tests.pg_service import Stores

pytestmark = pytest.mark.postgres


async def test_reap_forgets_enqueue_tokens_older_than_their_window(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    clock = ManualClock()
    queue = pg_stores.track(PostgresWorkQueue(pg_stores.pool, clock=clock, tables=tables))
    for n in range(3):
        await queue.enqueue(WorkItem(id=f"old{n}", tenant="t"))
    clock.advance(ENQUEUE_TOKEN_SECONDS / 2)
    await queue.enqueue(WorkItem(id="recent", tenant="t"))
    clock.advance(ENQUEUE_TOKEN_SECONDS / 2 + 1)
    await queue.reap()
    async with database_for(pg_stores.pool).session(5.0) as session:
        rows = await session.fetch(f"SELECT id FROM {tables.qualified(tables.enqueues)}")
    kept = [row[0] for row in rows]
    assert kept == ["recent"]
