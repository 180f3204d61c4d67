"""PostgreSQL reads every catalog line as a backward range of its own index, seeking to
the cursor, under the plan a prepared statement starts with and the generic one it may
settle on: a page costs the same at any store size (no scan of the catalog, no sort)."""

from __future__ import annotations

import pytest

from durably.postgres import statements as sql_files
from durably.postgres.executor import database_for
from tests.pg_service import Stores, plan_nodes

pytestmark = pytest.mark.postgres

BASE_US = 1_780_000_000_000_000
ROWS = 4000

# Ten tenants, so every line holds hundreds of rows: at a few rows a line, reading them all
# and sorting is the cheaper plan, and rightly chosen.
_FILL = """
INSERT INTO {workflow_catalog} (workflow, tenant, kind, parent, created, status)
SELECT 'durably:t3:t' || lpad((g % 10)::text, 2, '0') || ':wf-' || lpad(g::text, 5, '0'),
       't' || lpad((g % 10)::text, 2, '0'),
       (ARRAY['triage', 'notify', 'bill'])[g % 3 + 1],
       CASE WHEN g % 4 = 0 THEN 'durably:t3:t' || lpad((g % 10)::text, 2, '0') || ':p' END,
       $1::bigint + g,
       (ARRAY['pending', 'running', 'completed', 'failed', 'blocked'])[g % 5 + 1]
FROM generate_series(0, $2::integer - 1) AS g
"""

# Each line's statement, the index it must read, and its filter values ($5, $6).
LINES: dict[str, tuple[str, tuple[str, ...]]] = {
    "line_all": ("_all", ()),
    "line_tenant": ("_by_tenant", ("t01",)),
    "line_kind": ("_by_kind", ("bill",)),
    "line_status": ("_by_status", ("failed",)),
    "line_parent": ("_by_parent", ("durably:t3:t00:p",)),
    "line_tenant_kind": ("_by_tk", ("t01", "bill")),
    "line_tenant_status": ("_by_ts", ("t01", "failed")),
    "line_kind_status": ("_by_ks", ("bill", "failed")),
}


def _literal(value: object) -> str:
    return str(value) if isinstance(value, int) else "'" + str(value) + "'"


@pytest.mark.parametrize("pg_driver", ["asyncpg"])  # the plan is the server's, not a driver's
async def test_each_catalog_line_seeks_its_own_index_without_a_scan_or_sort(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    names = tables.names
    sql = sql_files.render_all(sql_files.load("catalog.sql"), names)
    catalog = names["workflow_catalog"].rsplit(".", 1)[-1].strip('"')
    async with database_for(pg_stores.pool).session(30.0) as session:
        await session.fetch(_FILL.format(workflow_catalog=names["workflow_catalog"]), BASE_US, ROWS)
        await session.fetch(f"ANALYZE {names['workflow_catalog']}")
        mark = (BASE_US + ROWS * 3 // 4, f"durably:t3:t00:wf-{ROWS * 3 // 4:05d}")
        for statement, (suffix, values) in LINES.items():
            await session.fetch(f"PREPARE probe AS {sql[statement].strip().rstrip(';')}")
            arguments = ", ".join(_literal(v) for v in (*mark, BASE_US + 10, 51, *values))
            for mode in ("force_custom_plan", "force_generic_plan"):
                await session.fetch(f"SET plan_cache_mode = {mode}")
                rows = await session.fetch(f"EXPLAIN (FORMAT JSON) EXECUTE probe({arguments})")
                plan = rows[0][0]
                nodes = plan_nodes(plan)
                reads = [n for n in nodes if n.get("Relation Name") == catalog]
                context = (statement, mode, nodes)
                assert len(reads) == 1, context
                assert reads[0]["Node Type"] in ("Index Scan", "Index Only Scan"), context
                assert reads[0]["Index Name"] == catalog + suffix, context
                assert reads[0]["Scan Direction"] == "Backward", context
                assert "ROW(" in reads[0]["Index Cond"], context  # the cursor is a seek
                assert not any(n["Node Type"] in ("Sort", "Incremental Sort") for n in nodes)
            await session.fetch("RESET plan_cache_mode")
            await session.fetch("DEALLOCATE probe")
