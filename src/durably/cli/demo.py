"""``durably demo``: the crash-and-resume story over ``./durably-demo.db``."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from typing import Any

from durably.cli.render import dollars, emit_json, table

DEFAULT_PATH = "durably-demo.db"
RUN_HEADERS = [
    "tenant",
    "run",
    "agent",
    "state",
    "paid calls",
    "after kill",
    "tool runs",
    "tool retries",
    "tokens",
    "cost",
]
TENANT_HEADERS = ["tenant", "runs", "paid calls", "tokens", "cost", "billed"]
LEGEND = (
    "paid calls: model requests the provider billed (its own table, not durably's records);\n"
    "  after kill: those billed to worker 2, which resumed each run from its records.\n"
    "tool runs: tool calls that ran, as the tools logged them; tool retries: attempts that\n"
    "  failed and were retried as a durable step (durably.Retry).\n"
    "tokens, cost: the run records (DurableAgent's ctx.add_usage at its price table);\n"
    "  billed: what the provider charged those runs."
)
MISSING_EXTRA = (
    "durably demo: the demo runs pydantic-ai agents, which need the extra: "
    "pip install 'durably[pydantic-ai]'"
)


def register(commands: Any) -> None:
    """Add the ``demo`` command."""
    demo = commands.add_parser(
        "demo",
        help="agent runs survive a worker killed with SIGKILL (SQLite, under a minute)",
        description="Start six runs of pydantic-ai agents (made durable with DurableAgent) "
        "for three tenants in a SQLite file, start a worker process, kill it with SIGKILL "
        "mid-run, and let a second worker finish every run without repeating a paid model "
        "call. Each invocation adds a new batch of runs to the file (earlier batches are "
        "kept); --reset starts afresh. Needs the pydantic-ai extra.",
    )
    demo.add_argument(
        "--db", default=DEFAULT_PATH, help=f"the SQLite file (default {DEFAULT_PATH})"
    )
    demo.add_argument("--reset", action="store_true", help="delete the file first")
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    demo.set_defaults(run=run_demo)


async def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; exit 0 only when every run finished, no paid step ran twice and
    every run record charged what the provider billed; 2 without pydantic-ai."""
    if not _importable("pydantic_ai"):
        print(MISSING_EXTRA, file=sys.stderr)
        return 2
    from durably.demo.scenario import Demo, DemoError

    say = (lambda line: print(line, file=sys.stderr)) if args.json else print
    try:
        report = await Demo(args.db, say=say, reset=args.reset).run()
    except DemoError as exc:
        print(f"durably demo: {exc}", file=sys.stderr)
        return 1
    if args.json:
        emit_json({**_fields(report), "no_paid_step_ran_twice": report.no_paid_step_twice})
        return 0 if report.ok else 1
    _print_tables(report)
    billed = report.paid_calls_billed
    print(
        f"Paid model calls billed: {billed}, for {report.distinct_paid_steps} distinct paid "
        f"steps; {report.billed_before_kill} were recorded before the kill and none ran again."
        if not report.recorded_before_kill_rerun
        else f"Paid model calls billed: {billed}, for {report.distinct_paid_steps} distinct "
        "paid steps."
    )
    if report.no_paid_step_twice:
        print("No paid step ran twice.")
    else:
        for line in report.repeated_paid_steps:
            print(f"PAID STEP RAN TWICE: {line}")
        for line in report.recorded_before_kill_rerun:
            print(f"RECORDED PAID STEP RAN AGAIN: {line}")
    if report.records_differing_from_bill:
        differing = ", ".join(report.records_differing_from_bill)
        print(f"RUN RECORDS DIFFER FROM THE BILL: {differing}")
    else:
        print("Every run record's tokens and cost equal what the provider billed for it.")
    if report.unfinished:
        print(f"UNFINISHED RUNS: {', '.join(report.unfinished)}")
    state = (
        "fresh file"
        if report.earlier_batches == 0
        else f"{report.earlier_batches} earlier batch(es) kept"
    )
    print(
        f"Batch {report.batch} in {_shortest(report.path)} ({state}); "
        f"took {report.seconds:.1f}s. Inspect it: {command_name()} runs list "
        f"--dsn sqlite:///{args.db} --tenant acme"
    )
    return 0 if report.ok else 1


def _print_tables(report: Any) -> None:
    runs = report.runs
    rows: list[list[object]] = [
        [
            r.tenant,
            r.run_id,
            r.agent,
            r.state,
            r.paid_calls,
            r.paid_after_kill,
            r.tool_runs,
            r.tool_retries,
            r.tokens,
            dollars(r.cost_micros),
        ]
        for r in runs
    ]
    rows.append(
        [
            "total",
            "",
            "",
            "",
            report.paid_calls_billed,
            sum(r.paid_after_kill for r in runs),
            sum(r.tool_runs for r in runs),
            sum(r.tool_retries for r in runs),
            sum(r.tokens for r in runs),
            dollars(sum(r.cost_micros for r in runs)),
        ]
    )
    tenants = [
        [
            t.tenant,
            t.runs,
            t.paid_calls,
            t.tokens,
            dollars(t.cost_micros),
            dollars(t.billed_cost_micros),
        ]
        for t in report.tenants
    ]
    print()
    print(table(rows, RUN_HEADERS, right=tuple(range(4, len(RUN_HEADERS)))))
    print()
    print(table(tenants, TENANT_HEADERS, right=tuple(range(1, len(TENANT_HEADERS)))))
    print()
    print(LEGEND)
    print()


def _importable(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (the demo's first
    worker starts while this process imports pydantic-ai, not after)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # set to None in sys.modules: its import is blocked
        return False


def command_name() -> str:
    """How to run this ``durably`` again from the reader's shell: ``durably`` when PATH
    finds this very program, else the path it was started by (``.venv/bin/durably``
    after ``make demo``), or ``python -m durably`` with this interpreter."""
    started = sys.argv[0]
    if os.path.basename(started) == "durably":
        found = shutil.which("durably")
        if found is not None and os.path.realpath(found) == os.path.realpath(started):
            return "durably"
        return _shortest(started)
    return f"{_shortest(sys.executable)} -m durably"


def _shortest(path: str) -> str:
    # Relative to the current directory when it is inside it (".venv/bin/durably").
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else path


def _fields(report: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(report)
