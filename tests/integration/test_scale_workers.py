"""Many worker processes over one store: PostgreSQL through PgBouncer in transaction mode
(waking by polling: the pooler carries no LISTEN) and a 3-master Redis Cluster. Orders
(gathers, a child, a message each) started over several tenants all end right, every step
paid once, counted from a ledger file every process appends to.

Sixteen processes per store (``DURABLY_SCALE_WORKERS`` sets another number), forked from a
fork server that imported durably once."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from durably.app import App
from tests.pg_service import create_database
from tests.pgbouncer_service import through_pgbouncer
from tests.redis_service import cluster_servers
from tests.scale.shop import EXPECTED, NOTE, build, expected_keys, ledger_counts
from tests.scale.worker import start_workers

pytestmark = pytest.mark.timeout(120)

WORKERS = int(os.environ.get("DURABLY_SCALE_WORKERS", "16"))
ORDERS = 24


async def _store(backing: str) -> str:
    if backing == "cluster":
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in cluster_servers())
    direct = create_database("statement_timeout = 30000")
    async with App(direct):  # migrated over a direct connection
        pass
    return through_pgbouncer(direct) + "&pool_size=3"


@pytest.mark.parametrize("backing", ["pgbouncer", "cluster"])
async def test_many_worker_processes_drain_orders_paying_each_step_once(
    backing: str, tmp_path: Path
) -> None:
    dsn = await _store(backing)
    ledger = tmp_path / "ledger"
    workers = start_workers(WORKERS, dsn, ledger, 600)
    try:
        app, order = build(dsn, ledger)
        async with app:
            run = uuid.uuid4().hex[:8]
            handles = [
                await order.start(n, id=f"order-{run}-{n}", tenant=f"tenant-{n % 5}")
                for n in range(ORDERS)
            ]
            for handle in handles:
                await handle.send(NOTE, "paid")
            results = await asyncio.gather(*(h.result(timeout=100) for h in handles))
        assert all(worker.is_alive() for worker in workers)  # none crashed
    finally:
        for worker in workers:
            worker.kill()
            worker.join()
    assert results == [EXPECTED] * ORDERS
    paid = ledger_counts(ledger)
    assert set(paid) == expected_keys([h.id for h in handles])
    assert {key: count for key, count in paid.items() if count != 1} == {}
