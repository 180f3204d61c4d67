"""The scale table's SQLite rows (see benchmarks.scale): each size in a fresh file (WAL,
``synchronous=FULL``), filled by one ``INSERT ... SELECT`` (and the rotation table from the
items, as the enqueues would have left it). The floor
is a table of ids with a ``taken`` flag in the same file, claimed by its first untaken id
and completed by a delete, each one transaction as durably's are."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from benchmarks import scale
from durably.clock import SystemClock
from durably.sqlite import SqliteWorkQueue, connect
from durably.sqlite.connection import Transaction
from durably.stores.work import QueuePolicy

FLOOR_CREATE = (
    "CREATE TABLE floor_jobs (id INTEGER PRIMARY KEY, taken INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX floor_jobs_free ON floor_jobs (id) WHERE taken = 0",
)
FLOOR_FILL = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
    "INSERT INTO floor_jobs (id) SELECT i FROM n"
)
FLOOR_CLAIM = (
    "UPDATE floor_jobs SET taken = 1 WHERE id = "
    "(SELECT id FROM floor_jobs WHERE taken = 0 ORDER BY id LIMIT 1) RETURNING id"
)
FLOOR_COMPLETE = "DELETE FROM floor_jobs WHERE id = ?"
NUMBERS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :items) "
FILL = NUMBERS + (
    "INSERT INTO durably_work (tenant, id, queue, payload, priority, attempts, state, "
    "enqueued_at, available_at, failures) "
    "SELECT 't' || (i % :tenants), 'i' || i, 'default', '{}', 20, 0, 'queued', "
    ":base + i * 1e-6, :base + i * 1e-6, '[]' FROM n"
)
PLACE = (
    "INSERT INTO durably_queue_tenants (queue, tenant, turn, head_at, head_seq, due) "
    "SELECT queue, tenant, 0, MIN(available_at), MIN(seq), 1 FROM durably_work "
    "GROUP BY queue, tenant"
)


async def _size(items: int, tenants: int) -> scale.Sample:
    with tempfile.TemporaryDirectory(prefix="durably-scale-") as directory:
        database = await connect(Path(directory) / "scale.db")
        try:
            queue = SqliteWorkQueue(
                database, clock=SystemClock(), policy=QueuePolicy(lease_seconds=60)
            )

            def fill(tx: Transaction) -> None:
                base = time.time() - 3600
                tx.execute(FILL, {"items": items, "tenants": tenants, "base": base})
                tx.execute(PLACE)
                for statement in FLOOR_CREATE:
                    tx.execute(statement)
                tx.execute(FLOOR_FILL, (items,))

            await database.transaction(fill)

            async def floor_claim() -> object:
                row = await database.transaction(lambda tx: tx.one(FLOOR_CLAIM))
                return None if row is None else row[0]

            async def floor_complete(job: object) -> None:
                await database.transaction(lambda tx: tx.execute(FLOOR_COMPLETE, (job,)))

            return await scale.timed(queue, floor_claim, floor_complete)
        finally:
            await database.close()


def table() -> list[list[scale.Row]]:
    return scale.run(lambda items, tenants: asyncio.run(_size(items, tenants)))
