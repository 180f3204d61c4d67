"""The worker's keep-alives stop when their pass or item ends, also when the pool they
renew through drops the cancel (psycopg-pool waits with `asyncio.wait_for`, which on
Python 3.11 returns a wait that completed as the cancel landed and drops the cancel)."""

from __future__ import annotations

import asyncio

import pytest

from durably.engine import Worker
from durably.engine.runtime import Execution
from durably.engine.worker import start_workflow
from durably.memory import MemoryScheduler
from durably.postgres import PostgresCheckpointer
from durably.stores import SplitDurable
from durably.stores.status import WorkflowStatus
from tests.pg_service import Stores, close_pool, open_pool

pytestmark = pytest.mark.postgres


async def test_a_pass_ending_while_its_renewal_waits_for_a_connection_reports_its_outcome(
    postgres_dsn: str,
) -> None:
    setup = await open_pool("psycopg", postgres_dsn)
    try:
        tables = await Stores(setup, "psycopg").tables()
    finally:
        await close_pool(setup)
    pool = await open_pool("psycopg", postgres_dsn, size=1)
    try:
        checkpointer = PostgresCheckpointer(pool, tables=tables)
        durable = SplitDurable(checkpointer, MemoryScheduler(lease=30.0, namespace="kind"))

        async def body(run: Execution) -> str:
            # Hold the pool's one connection until the keep-alive's renewal queues for it,
            # then hand it over and end the pass at once.
            async with pool.connection():
                while pool.get_stats().get("requests_waiting", 0) < 1:
                    await asyncio.sleep(0.001)
            return "done"

        worker = Worker(poll_seconds=0.05, maintenance_seconds=0.1, grace_seconds=0.5)
        worker.workflow("kind", body, durable, alive=0.06)
        await start_workflow(durable, "wf")
        serving = asyncio.create_task(worker.run(install_signal_handlers=False))
        try:

            async def completed() -> None:
                while True:
                    info = await checkpointer.get_status("wf")
                    if info is not None and info.status is WorkflowStatus.COMPLETED:
                        return
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(completed(), 5.0)
        finally:
            worker.stop()
            await asyncio.wait_for(serving, 10.0)
        # The claim was released, not renewed on by a keep-alive that missed its cancel.
        assert await checkpointer.claim("wf", 30.0, 30.0) is not None
    finally:
        await close_pool(pool)
