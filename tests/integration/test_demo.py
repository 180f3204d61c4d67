"""``durably demo`` end to end in a temporary directory: a worker process is SIGKILLed
mid-run, a second finishes every run, and the demo's claims hold when checked against the
file itself (the provider's bill, the tools' log, the run records), not only against its
own report."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from durably.demo.app import SCRIPTS, agent_run_id, run_id
from durably.demo.ledger import Ledger, Origin
from durably.demo.provider import INPUT_MICROS_PER_TOKEN, OUTPUT_MICROS_PER_TOKEN
from durably.stores.opening import open_stores
from durably.stores.runs import RunRecord, StateKey

PASS_COUNTS = re.compile(r"this pass: (\d+) steps run, (\d+) replayed from records")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def run_demo(cwd: Path, *extra: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": SRC}
    done = subprocess.run(
        [sys.executable, "-m", "durably", "demo", "--json", *extra],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "killed worker 1 with SIGKILL" in done.stderr
    assert "reusing" in done.stderr
    assert "approved send_email" in done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def query(path: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(sql, params).fetchall()


def billed_per_step(path: Path, batch: int) -> Counter[tuple[str, str, str]]:
    rows = query(
        path,
        "SELECT tenant, workflow, step FROM demo_bill WHERE batch = ? AND billed_at IS NOT NULL",
        batch,
    )
    return Counter((tenant, workflow, step) for tenant, workflow, step in rows)


def billed_per_run(path: Path, batch: int) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(input tokens, output tokens, cost) the provider billed per agent run."""
    rows = query(
        path,
        "SELECT tenant, workflow, sum(input_tokens), sum(output_tokens), sum(cost_micros) "
        "FROM demo_bill WHERE batch = ? AND billed_at IS NOT NULL GROUP BY tenant, workflow",
        batch,
    )
    return {(t, w): (int(i), int(o), int(c)) for t, w, i, o, c in rows}


async def run_records(path: Path, runs: list[tuple[str, str]]) -> dict[tuple[str, str], RunRecord]:
    stores = await open_stores(f"sqlite:///{path}")
    try:
        found = {
            run: await stores.state.get_run(StateKey(tenant=run[0], id=run[1])) for run in runs
        }
    finally:
        await stores.close()
    assert all(found.values())
    return {run: record for run, record in found.items() if record is not None}


async def seed_earlier_batch(path: Path) -> list[tuple[Any, ...]]:
    """A file holding an earlier batch with one billed call, as a previous demo leaves it;
    its bill's rows."""
    stores = await open_stores(f"sqlite:///{path}")
    try:
        ledger = Ledger(stores.database)
        await ledger.prepare()
        batch = await ledger.new_batch(1.0)
        origin = Origin(batch, "acme", run_id(batch, "research"), "m[1]", "demo-worker-1")
        call = await ledger.start_call(origin, 1.0)
        await ledger.bill_call(call, now=2.0, input_tokens=10, output_tokens=1, cost_micros=45)
    finally:
        await stores.close()
    return query(path, "SELECT * FROM demo_bill")


def test_the_demo_survives_a_killed_worker_and_no_paid_step_runs_twice(tmp_path: Path) -> None:
    path = tmp_path / "durably-demo.db"
    earlier = asyncio.run(seed_earlier_batch(path))
    report = run_demo(tmp_path)
    batch = report["batch"]
    assert report["path"] == str(path)
    assert report["no_paid_step_ran_twice"] is True
    assert report["records_differing_from_bill"] == []
    assert report["unfinished"] == []
    # A file that holds an earlier batch gets a new one; the earlier one is kept.
    assert (report["earlier_batches"], batch) == (1, 2)
    assert query(path, "SELECT * FROM demo_bill WHERE batch = 1") == earlier
    assert len(report["runs"]) == len(SCRIPTS) == 6
    assert {r["tenant"] for r in report["runs"]} == {"acme", "globex", "initech"}
    assert all(r["state"] == "completed" and r["status"] == "completed" for r in report["runs"])

    # Checked against the provider's own bill: every model request of every run was billed
    # exactly once (one per tool call, one for the answer), though a worker was killed.
    per_step = billed_per_step(path, batch)
    assert max(per_step.values()) == 1
    agent_runs = {
        (s.tenant, agent_run_id(run_id(batch, s.name)) if s.sleep else run_id(batch, s.name)): s
        for s in SCRIPTS
    }
    paid = Counter((tenant, workflow) for tenant, workflow, _ in per_step)
    assert paid == {run: len(script.calls) + 1 for run, script in agent_runs.items()}
    assert sum(per_step.values()) == report["paid_calls_billed"]
    # The kill happened midway: some calls were billed before it, the rest after it, and
    # the second worker paid for none that was recorded before the kill.
    assert 0 < report["billed_before_kill"] < report["paid_calls_billed"]
    assert report["recorded_before_kill_rerun"] == []
    assert sum(r["paid_after_kill"] for r in report["runs"]) == (
        report["paid_calls_billed"] - report["billed_before_kill"]
    )

    # Tokens and cost on every agent run's record (added by DurableAgent at its price
    # table) equal what the provider billed for that run; per tenant too.
    charged = billed_per_run(path, batch)
    records = asyncio.run(run_records(path, list(agent_runs)))
    for run, (input_tokens, output_tokens, cost) in charged.items():
        record = records[run]
        assert (record.usage.input_tokens, record.usage.output_tokens) == (
            input_tokens,
            output_tokens,
        )
        assert record.usage.requests == paid[run]
        assert (
            record.cost_micros
            == cost
            == (input_tokens * INPUT_MICROS_PER_TOKEN + output_tokens * OUTPUT_MICROS_PER_TOKEN)
        )
    for total in report["tenants"]:
        mine = [run for run in charged if run[0] == total["tenant"]]
        assert total["cost_micros"] == sum(records[run].cost_micros for run in mine)
        assert total["cost_micros"] == total["billed_cost_micros"] > 0

    # Checked against the tools' own log: each tool call ran once (the approved send_email
    # too); the flaky weather tool failed and was retried as a durable step.
    tools = query(
        path, "SELECT workflow, step, tool, outcome FROM demo_tool_runs WHERE batch = ?", batch
    )
    ran = Counter((w, step) for w, step, _, outcome in tools if outcome == "ran")
    assert max(ran.values()) == 1
    assert len(ran) == sum(len(s.calls) for s in SCRIPTS)
    assert [tool for _, _, tool, outcome in tools if outcome == "ran"].count("send_email") == 1
    assert {tool for _, _, tool, outcome in tools if outcome == "failed"} == {"weather"}
    assert sum(r["tool_retries"] for r in report["runs"]) >= 1

    # The workers' logs agree: passes of the second worker answered recorded steps from
    # their records instead of running them again.
    logged = [0, 0]
    for log in tmp_path.glob("durably-demo.db.worker-*.log"):
        for steps_ran, replayed in PASS_COUNTS.findall(log.read_text()):
            logged[0] += int(steps_ran)
            logged[1] += int(replayed)
    assert logged[0] > 0
    assert logged[1] > 0
