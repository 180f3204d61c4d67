"""Status writes crossing each other's statuses never deadlock on the catalog's counts.

A status write moves its workflow's catalog counts on the workflow's shard: out of the
old status and into the new, for its tenant and for every tenant's row. Two workflows of
one kind on one shard, one going running → blocked while the other goes blocked →
running, take those rows in the same order, so they never wait on each other in a cycle.
PostgreSQL would break such a cycle after `deadlock_timeout` and the store retry it, so
the workflows would still end right: the server's own count of deadlocks is what tells.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from durably import WorkflowStatus
from durably.app import App, Context
from durably.app._tenancy import workflow_key
from tests.pg_service import create_database

pytestmark = pytest.mark.postgres

WORKFLOWS = 16
"""Workflows flipping statuses at once, half of them in a second tenant."""
ROUNDS = 60


def _same_shard(dsn: str, count: int) -> list[tuple[str, str]]:
    """``count`` (tenant, id) pairs, alternating two tenants, whose workflows the store
    counts on one shard (hashing their keys as it does)."""
    tenants = ("acme", "globex")
    candidates = [(tenants[n % 2], f"w{n}") for n in range(4000)]
    keys = [workflow_key(tenant, id) for tenant, id in candidates]
    with psycopg.connect(dsn, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT n FROM unnest(%s::text[]) WITH ORDINALITY AS k (key, n) "
            "WHERE hashtext(k.key) & 15 = 0 ORDER BY n",
            (keys,),
        ).fetchall()
    chosen = [candidates[int(row[0]) - 1] for row in rows]
    by_tenant = [[pair for pair in chosen if pair[0] == tenant] for tenant in tenants]
    return [pair for two in zip(*by_tenant, strict=False) for pair in two][:count]


def _deadlocks(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as connection:
        row = connection.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_status_writes_crossing_statuses_on_one_shard_never_deadlock() -> None:
    dsn = create_database("deadlock_timeout = '50ms'")
    app = App(dsn)

    @app.workflow(name="flip")
    async def flip(ctx: Context) -> None:
        return None

    pairs = _same_shard(dsn, WORKFLOWS)
    assert len(pairs) == WORKFLOWS
    async with app:
        for tenant, id in pairs:
            await flip.start(id=id, tenant=tenant)
        stores = await app.stores()
        checkpointer: Any = stores.checkpointer
        holders = [
            await checkpointer.claim(workflow_key(tenant, id), 60.0, 60.0) for tenant, id in pairs
        ]
        assert all(holder is not None for holder in holders)
        before = _deadlocks(dsn)
        statuses = (WorkflowStatus.RUNNING, WorkflowStatus.BLOCKED)
        for round in range(ROUNDS):
            # Half go one way while the other half go the other, all at once.
            await asyncio.gather(
                *(
                    checkpointer.set_status(holder, statuses[(n + round) % 2])
                    for n, holder in enumerate(holders)
                )
            )
        after = _deadlocks(dsn)
        counts = await app.workflow_counts()
    assert after - before == 0
    # And the counts stayed exact: the last round left half running, half blocked.
    assert counts.by_status == {
        WorkflowStatus.RUNNING: WORKFLOWS // 2,
        WorkflowStatus.BLOCKED: WORKFLOWS // 2,
    }
