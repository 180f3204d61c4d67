"""A SQLite file of schema version 6 (no throughput ring) opens, gains the ring, and the
items and workflows that finish from then on are counted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durably import App, Context, WorkItem
from durably.sqlite import SCHEMA_VERSION
from durably.stores.catalog import Cataloguing


def _app(path: Path) -> App:
    app = App(f"sqlite:///{path}")

    @app.workflow(name="short")
    async def short(ctx: Context, n: int) -> int:
        return n

    return app


async def test_a_version_6_file_gains_the_throughput_ring_and_counts_from_then_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    async with _app(path):
        pass
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER durably_workflow_catalog_rated")
        db.execute("DROP TABLE durably_throughput")
        db.execute("UPDATE durably_schema_version SET version = 6")

    app = _app(path)
    async with app:
        await app.workflows["short"].start(1, id="w1")
        await app.run_until_idle()
        stores = await app.stores()
        await stores.queue.enqueue(WorkItem(id="i1", tenant="acme", queue="q"))
        held = await stores.queue.claim(worker="w", queue="q")
        assert held is not None
        await stores.queue.complete(held.id, tenant="acme", worker="w")
        items = await stores.queue.finished_per_minute(queues=["q"])
        assert [(m.completed, m.failed) for m in items["q"]] == [(1, 0)]
        assert isinstance(stores.checkpointer, Cataloguing)
        ended = await stores.checkpointer.finished_per_minute()
        assert sum(m.completed for m in ended["short"]) == 1
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM durably_schema_version").fetchone()[0] == 8
    assert SCHEMA_VERSION == 8
