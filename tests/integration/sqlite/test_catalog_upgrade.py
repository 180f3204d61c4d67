"""A SQLite file of schema version 5 (no workflow catalog) opens, gains the catalog, and
`catalogue_earlier` enters the workflows it held, which then list and count."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from durably import App, Context, ManualClock, WorkflowStatus
from durably.app.storage import catalogue_earlier
from durably.sqlite import SCHEMA_VERSION


def _app(path: Path) -> tuple[App, object]:
    app = App(f"sqlite:///{path}", clock=ManualClock())

    @app.workflow(name="old")
    async def old(ctx: Context, n: int) -> int:
        return n

    return app, old


def _as_version_5(path: Path) -> None:
    with sqlite3.connect(path) as db:
        for trigger in [
            row[0]
            for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%catalog%'"
            )
        ]:
            db.execute(f'DROP TRIGGER "{trigger}"')
        db.execute("DROP TABLE durably_workflow_catalog")
        db.execute("DROP TABLE durably_workflow_catalog_counts")
        db.execute("UPDATE durably_schema_version SET version = 5")


async def test_a_version_5_file_gains_the_catalog_and_lists_its_workflows_once_entered(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    app, old = _app(path)
    async with app:
        for n in range(3):
            await old.start(n, id=f"w{n}", tenant="acme")  # type: ignore[attr-defined]
        await app.run_until_idle()
    _as_version_5(path)

    app, _ = _app(path)
    async with app:
        assert (await app.list_workflows(tenant="acme")).workflows == []
        stores = await app.stores()
        assert await catalogue_earlier(stores.checkpointer) == 3
        listed = await app.list_workflows(tenant="acme")
        assert [w.workflow for w in listed.workflows] == ["w2", "w1", "w0"]
        counts = await app.workflow_counts(tenant="acme")
        assert counts.by_status == {WorkflowStatus.COMPLETED: 3}
        assert await catalogue_earlier(stores.checkpointer) == 3  # again: nothing doubled
        assert (await app.workflow_counts()).total == 3
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM durably_schema_version").fetchone()[0] == (
            SCHEMA_VERSION
        )
