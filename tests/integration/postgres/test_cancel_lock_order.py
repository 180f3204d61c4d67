"""A bulk cancel beside serving workers never deadlocks on the rows they share.

A page's cancel takes every workflow's own locks (its inbox lock and claim row) first,
then the shared count rows in one statement; a worker's status write takes its
workflow's claim row first. So a worker reporting on a workflow of the page waits at its
first lock holding no shared row, and the two never wait on each other in a cycle.
PostgreSQL breaks a cycle after `deadlock_timeout` and the store retries it, so the
workflows would still end right: the server's own count of deadlocks is what tells.
"""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from durably import WorkflowStatus
from durably.app import App, Context, Topic
from tests.pg_service import create_database

pytestmark = pytest.mark.postgres

WORKFLOWS = 3000
GO = Topic("go", str)


def _deadlocks(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as connection:
        row = connection.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_bulk_cancel_beside_serving_workers_never_deadlocks() -> None:
    dsn = create_database("deadlock_timeout = '50ms'")
    app = App(dsn)
    tenant = f"t-{uuid.uuid4().hex[:6]}"

    @app.step
    async def work(n: int) -> int:
        return n

    @app.workflow(name="cancel.order")
    async def order(ctx: Context, n: int) -> int:
        await work(n)
        if n % 2:
            await ctx.recv(GO)
        return n

    async with app:
        for first in range(0, WORKFLOWS, 1000):
            batch = range(first, first + 1000)
            await order.start_many([(n,) for n in batch], tenant=tenant)
        before = _deadlocks(dsn)
        serving = asyncio.create_task(app.serve(signals=False, poll=0.05, concurrency=8))
        try:
            await asyncio.sleep(0.3)  # the workers are reporting on the pages' workflows
            after = None
            while True:
                result = await app.cancel_workflows(tenant=tenant, limit=250, after=after)
                after = result.next_after
                if after is None:
                    break
            ended = {WorkflowStatus.CANCELLED, WorkflowStatus.COMPLETED}
            deadline = asyncio.get_running_loop().time() + 60
            while True:
                counts = await app.workflow_counts(tenant=tenant)
                if set(counts.by_status) <= ended or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.2)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        deadlocks = _deadlocks(dsn) - before
    assert set(counts.by_status) <= ended, counts.by_status
    assert counts.total == WORKFLOWS
    assert deadlocks == 0
