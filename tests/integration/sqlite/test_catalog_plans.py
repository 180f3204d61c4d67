"""SQLite reads every catalog line as a range of its own index, seeking to the cursor: a
page costs the same at any store size (no scan of the catalog, no sort)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from durably.sqlite import connect
from durably.sqlite.catalog import line_params, line_statement
from durably.sqlite.statements import load_statements
from durably.stores.catalog import Line
from durably.stores.status import WorkflowStatus

_SQL = load_statements("catalog.sql")
BASE_US = 1_780_000_000_000_000
ROWS = 3000

LINES = {
    "durably_workflow_catalog_all": Line(),
    "durably_workflow_catalog_by_tenant": Line(tenant="t03"),
    "durably_workflow_catalog_by_kind": Line(kind="bill"),
    "durably_workflow_catalog_by_status": Line(status=WorkflowStatus.FAILED),
    "durably_workflow_catalog_by_parent": Line(parent="durably:t3:t00:p"),
    "durably_workflow_catalog_by_tenant_kind": Line(tenant="t03", kind="bill"),
    "durably_workflow_catalog_by_tenant_status": Line(tenant="t03", status=WorkflowStatus.FAILED),
    "durably_workflow_catalog_by_kind_status": Line(kind="bill", status=WorkflowStatus.FAILED),
}


def _row(n: int) -> tuple[str, str, str, str | None, int, str]:
    tenant = f"t{n % 20:02d}"
    parent = f"durably:t3:{tenant}:p" if n % 4 == 0 else None
    status = ("pending", "running", "completed", "failed", "blocked")[n % 5]
    kind = ("triage", "notify", "bill")[n % 3]
    return f"durably:t3:{tenant}:wf-{n:05d}", tenant, kind, parent, BASE_US + n, status


@pytest.mark.parametrize("analyzed", [False, True])
async def test_each_catalog_line_seeks_its_own_index_without_a_scan_or_sort(
    tmp_path: Path, analyzed: bool
) -> None:
    database = await connect(tmp_path / "catalog.db")
    await database.close()
    with sqlite3.connect(tmp_path / "catalog.db") as raw:
        raw.executemany(
            "INSERT INTO durably_workflow_catalog VALUES (?, ?, ?, ?, ?, ?)",
            (_row(n) for n in range(ROWS)),
        )
        if analyzed:  # statistics must not talk the planner out of the line's index
            raw.execute("ANALYZE")
        for index, line in LINES.items():
            mark = (BASE_US + ROWS // 2, _row(ROWS // 2)[0])
            statement = _SQL[line_statement(line)]
            params = line_params(line, mark, BASE_US + 10, 51)
            plan = [str(row[3]) for row in raw.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
            catalog = [step for step in plan if step.startswith(("SCAN c", "SEARCH c"))]
            assert len(catalog) == 1, (index, plan)
            assert catalog[0].startswith(f"SEARCH c USING INDEX {index} ("), (index, plan)
            assert "(created,workflow)<(?,?)" in catalog[0], (index, plan)
            assert not any("TEMP B-TREE" in step for step in plan), (index, plan)
            found = raw.execute(statement, params).fetchall()
            assert found, index
            assert all((row[4], row[0]) < mark for row in found), index
