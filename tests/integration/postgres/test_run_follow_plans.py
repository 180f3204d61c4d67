"""Every status write that moves a workflow's run record finds the record by one probe of
the followed-runs index on both its columns (tenant and followed key), under the plan a
prepared statement starts with and the generic one it may settle on: the catalog's tenant
and key are "C" text and the runs' are not, and compared in the catalog's collation the
index could match only the key, so each status write read the whole index (12 ms and
1,400 pages at 200,000 runs)."""

from __future__ import annotations

import re

import pytest

from durably.postgres import statements as sql_files
from durably.postgres.executor import database_for
from tests.pg_service import Stores, plan_nodes

pytestmark = pytest.mark.postgres

RUNS = 20_000
TENANTS = 200

_FILL = """
INSERT INTO {table} (tenant, run_id, version, state, updated_at, body, tenant_seq)
SELECT 't' || (g % {tenants}), 'r' || g, 1, 'pending', 0,
       jsonb_build_object(
           'state', 'pending', 'run_id', 'r' || g, 'tenant', 't' || (g % {tenants}),
           'metadata', jsonb_build_object(
               'durably_workflow', 'durably:t4:t' || (g % {tenants}) || ':r' || g)),
       g
FROM generate_series(1, {runs}) AS g
"""

# The statements whose `ran` step moves a run, in the files that hold them.
STATEMENTS = (
    ("checkpointer.sql", "set_status"),
    ("checkpointer.sql", "finish"),
    ("checkpointer.sql", "restart"),
    ("checkpointer.sql", "cancel_end_many"),
    ("gates.sql", "write_status"),
)

_SAMPLES = {
    "text": "'durably:t4:t7:r7'",
    "bigint": "7",
    "integer": "7",
    "smallint": "7",
    "boolean": "true",
    "jsonb": "'{}'",
    "float8": "0",
    "double": "0",
    "text[]": "ARRAY['durably:t4:t7:r7']",
    "bigint[]": "ARRAY[7]::bigint[]",
    "integer[]": "ARRAY[7]",
}


def _arguments(statement: str) -> str:
    """A literal of each parameter's declared type (every parameter here is cast)."""
    types: dict[int, str] = {}
    for number, kind in re.findall(r"\$(\d+)::([a-z]+(?:\[\])?)", statement):
        types.setdefault(int(number), kind)
    assert sorted(types) == list(range(1, len(types) + 1)), types
    return ", ".join(_SAMPLES[types[n]] for n in sorted(types))


@pytest.mark.parametrize("pg_driver", ["asyncpg"])  # the plan is the server's, not a driver's
async def test_status_writes_probe_the_followed_run_on_both_index_columns(
    pg_stores: Stores,
) -> None:
    tables = await pg_stores.tables()
    names = tables.names
    runs = names["runs"].rsplit(".", 1)[-1].strip('"')
    async with database_for(pg_stores.pool).session(30.0) as session:
        await session.fetch(_FILL.format(table=names["runs"], runs=RUNS, tenants=TENANTS))
        await session.fetch(f"ANALYZE {names['runs']}")
        checked = 0
        for filename, name in STATEMENTS:
            templates = sql_files.load(filename, fragments_from=("checkpointer.sql",))
            statement = sql_files.render_all(templates, names)[name]
            if "durably_workflow" not in statement:
                continue
            await session.fetch(f"PREPARE probe AS {statement.strip().rstrip(';')}")
            for mode in ("force_custom_plan", "force_generic_plan"):
                await session.fetch(f"SET plan_cache_mode = {mode}")
                rows = await session.fetch(
                    f"EXPLAIN (FORMAT JSON) EXECUTE probe({_arguments(statement)})"
                )
                plan = rows[0][0]
                nodes = plan_nodes(plan)
                reads = [
                    n
                    for n in nodes
                    if n.get("Relation Name") == runs and n["Node Type"].endswith("Scan")
                ]
                context = (name, mode, nodes)
                assert len(reads) == 1, context
                assert reads[0]["Node Type"] == "Index Scan", context
                assert reads[0]["Index Name"] == runs + "_following", context
                assert "tenant =" in reads[0]["Index Cond"], context
                assert "durably_workflow" in reads[0]["Index Cond"], context
            await session.fetch("RESET plan_cache_mode")
            await session.fetch("DEALLOCATE probe")
            checked += 1
        assert checked >= 4
