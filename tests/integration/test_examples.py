"""Every example in examples/ runs as a reader would run it, and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, dsn: str | None = None) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "DURABLY_DSN"}
    if dsn is not None:
        environment["DURABLY_DSN"] = dsn
    finished = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    return finished.stdout


def test_the_approval_example_pays_escalates_on_timeout_and_escalates_over_the_limit() -> None:
    lines = run_example("approval.py").splitlines()
    assert lines == [
        "waiting for the approver",
        "exp-1: paid",
        "exp-2: escalated",
        "exp-3: escalated",
    ]


def test_the_fanout_example_gathers_every_child_and_starts_nothing_twice() -> None:
    lines = run_example("fanout.py").splitlines()
    assert lines[0].startswith("20 pages, ")
    assert lines[0].endswith("longest: https://example.com/docs/section/section/section/11")
    assert lines[1] == "started again: False result: 20"


def test_the_deploy_example_keeps_in_flight_orders_on_the_old_path() -> None:
    lines = run_example("deploy_patched.py").splitlines()
    assert lines == [
        "order-1 ['charged order-1', 'shipped as TRACK-order-1']",
        "order-2 ['charged order-2', 'receipt for order-2', 'shipped as TRACK-order-2']",
    ]


@pytest.mark.parametrize("name", ["approval.py", "deploy_patched.py", "fanout.py"])
def test_an_example_runs_again_over_the_database_of_its_last_run(name: str, tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'kept.db'}"
    assert run_example(name, dsn) == run_example(name, dsn)


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_is_covered_by_a_test_here(name: str) -> None:
    assert name in Path(__file__).read_text(encoding="utf-8")
