"""``durably demo`` end to end in a temporary directory: a worker process is SIGKILLed
mid-run, a second finishes every run, and the demo's claims hold when checked against the
file itself (the provider's bill, the run records), not only against its own report."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from durably.demo.scenario import RUNS

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
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "killed worker 1 with SIGKILL" in done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def billed_per_step(path: Path, batch: int) -> Counter[tuple[str, str]]:
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT workflow, step FROM demo_model_calls WHERE batch = ? AND billed_at IS NOT NULL",
            (batch,),
        ).fetchall()
    return Counter((workflow, step) for workflow, step in rows)


def charged_per_run(path: Path, batch: int) -> dict[str, tuple[int, int]]:
    """(tokens, cost) billed by the provider per workflow."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT workflow, sum(input_tokens + output_tokens), sum(cost_micros) "
            "FROM demo_model_calls WHERE batch = ? AND billed_at IS NOT NULL GROUP BY workflow",
            (batch,),
        ).fetchall()
    return {workflow: (int(tokens), int(cost)) for workflow, tokens, cost in rows}


def test_the_demo_survives_a_killed_worker_and_no_paid_step_runs_twice(tmp_path: Path) -> None:
    report = run_demo(tmp_path)
    path = tmp_path / "durably-demo.db"
    assert report["path"] == str(path)
    assert report["no_paid_step_ran_twice"] is True
    assert report["unfinished"] == []
    assert report["earlier_batches"] == 0
    assert len(report["runs"]) == 6
    assert {r["tenant"] for r in report["runs"]} == {"acme", "globex", "initech"}
    assert all(r["state"] == "completed" and r["status"] == "completed" for r in report["runs"])

    # The kill happened midway: some paid calls were billed before it, more after it.
    assert 0 < report["billed_before_kill"] < report["paid_calls_billed"]
    # The second worker replayed recorded steps instead of running them again.
    assert sum(r["steps_replayed"] for r in report["runs"]) > 0

    # Checked against the provider's own bill: every paid step billed exactly once.
    per_step = billed_per_step(path, report["batch"])
    assert per_step
    assert max(per_step.values()) == 1
    assert sum(per_step.values()) == report["paid_calls_billed"]

    # Tokens and cost on every RunRecord equal what the provider billed for that run.
    charged = charged_per_run(path, report["batch"])
    for run in report["runs"]:
        workflow = f"demo/{run['tenant']}/{run['run_id']}"
        assert (run["tokens"], run["cost_micros"]) == charged[workflow]

    # A failing tool was retried with backoff (durably.Retry), and the retry was counted.
    assert any(r["tool_retries"] >= 1 for r in report["runs"])

    # Every tool a run called (an approved action calls its tool too) is on its record's
    # usage, once: replays do not count again.
    tools = {name: sum(1 for a in plan if a["kind"] != "sleep") for _, name, _, _, plan in RUNS}
    for run in report["runs"]:
        assert run["tool_calls"] == tools[run["run_id"].split("-", 1)[1]] > 0

    # The workers' logs agree: passes of the second worker answered recorded steps from
    # their records instead of running them again.
    logged = [0, 0]
    for log in tmp_path.glob("durably-demo.db.worker-*.log"):
        for ran, replayed in PASS_COUNTS.findall(log.read_text()):
            logged[0] += int(ran)
            logged[1] += int(replayed)
    assert logged[0] > 0
    assert logged[1] > 0

    # Running it again works: a new batch in the same file, the old one kept.
    again = run_demo(tmp_path)
    assert again["batch"] == report["batch"] + 1
    assert again["earlier_batches"] == 1
    assert again["no_paid_step_ran_twice"] is True
    assert max(billed_per_step(path, again["batch"]).values()) == 1
    assert billed_per_step(path, report["batch"]) == per_step
