"""``durably demo``: the crash-and-resume story over ``./durably-demo.db``."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any

from durably.cli.render import dollars, emit_json, table

DEFAULT_PATH = "durably-demo.db"
HEADERS = [
    "tenant",
    "run",
    "state",
    "steps run",
    "replayed",
    "paid calls",
    "tool calls",
    "tokens",
    "cost",
    "tool retries",
]
LEGEND = (
    "steps run: the agent's steps executed, over every pass of the run (model calls, tool\n"
    "  calls and the usage each charged with ctx.transact).\n"
    "replayed: those steps a pass answered from the record instead of running them again.\n"
    "tool retries: tool attempts that failed and were tried again (durably.Retry)."
)


def register(commands: Any) -> None:
    """Add the ``demo`` command."""
    demo = commands.add_parser(
        "demo",
        help="agent runs survive a worker killed with SIGKILL (SQLite, under a minute)",
        description="Queue six agent runs of three tenants as durable workflows in a SQLite "
        "file, start a worker process, kill it with SIGKILL mid-run, and let a second worker "
        "finish every run without repeating a paid model call. Each invocation adds a new "
        "batch of runs to the file (earlier batches are kept); --reset starts afresh.",
    )
    demo.add_argument(
        "--db", default=DEFAULT_PATH, help=f"the SQLite file (default {DEFAULT_PATH})"
    )
    demo.add_argument("--reset", action="store_true", help="delete the file first")
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    demo.set_defaults(run=run_demo)


async def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; exit 0 only when every run finished and no paid step ran twice."""
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
    rows = [
        [
            r.tenant,
            r.run_id,
            r.state,
            r.steps_run,
            r.steps_replayed,
            r.paid_calls,
            r.tool_calls,
            r.tokens,
            dollars(r.cost_micros),
            r.tool_retries,
        ]
        for r in report.runs
    ]
    total_tokens = sum(r.tokens for r in report.runs)
    total_cost = sum(r.cost_micros for r in report.runs)
    rows.append(
        [
            "total",
            "",
            "",
            sum(r.steps_run for r in report.runs),
            sum(r.steps_replayed for r in report.runs),
            report.paid_calls_billed,
            sum(r.tool_calls for r in report.runs),
            total_tokens,
            dollars(total_cost),
            sum(r.tool_retries for r in report.runs),
        ]
    )
    print()
    print(table(rows, HEADERS, right=tuple(range(3, len(HEADERS)))))
    print()
    print(LEGEND)
    print()
    print(
        f"Paid model calls billed: {report.paid_calls_billed}, for "
        f"{report.distinct_paid_steps} distinct paid steps; "
        f"{report.billed_before_kill} were recorded before the kill and none ran again."
        if not report.recorded_before_kill_rerun
        else f"Paid model calls billed: {report.paid_calls_billed}, for "
        f"{report.distinct_paid_steps} distinct paid steps."
    )
    if report.no_paid_step_twice:
        print("No paid step ran twice.")
    else:
        for line in report.repeated_paid_steps:
            print(f"PAID STEP RAN TWICE: {line}")
        for line in report.recorded_before_kill_rerun:
            print(f"RECORDED PAID STEP RAN AGAIN: {line}")
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
