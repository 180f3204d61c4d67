"""The App's own work per workflow pass, counted in instructions rather than timed.

On a shared machine the App's timed figures (`benchmarks.app`) swing by a fifth from run
to run, more than the changes worth making to the App's Python. Valgrind's callgrind
counts the instructions a process runs, the same on every run, so this prints what a
five-step pass costs through ``@app.workflow``/``@app.step`` against the same pass through
``run.step``, on the memory backing (no server whose timing could change the count), each
ended as the ``Worker`` ends it (``finish_workflow`` with the App's result record, or the
``completed`` status).

Each side runs ``FEW`` and ``MANY`` passes in separate processes under callgrind, with and
without the passes themselves (start, claim and release only), so start-up, imports and
the start records are subtracted out::

    python -m benchmarks.app_instructions        # needs valgrind on PATH

Not part of ``python -m benchmarks``: eight runs under callgrind take a few minutes.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from benchmarks.app import engine_five, register
from durably import App
from durably.app import _layout as layout
from durably.engine.runtime import resume
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Completed, Finish, finish_workflow

FEW, MANY = 100, 600
WARM = 50
"""Passes each process runs before the counted ones (their cost is in both counts)."""


async def passes(side: str, count: int, run_them: bool) -> None:
    """``WARM + count`` workflows of ``side`` ("app" or "engine") started, claimed and,
    with ``run_them``, passed through to their end; else released unrun. The workflows
    are `benchmarks.app`'s five-step ones."""
    app = App("memory://")
    _, kind = register(app, 0)
    checkpointer = (await app.stores()).checkpointer
    workflow = app.workflows[kind]
    for n in range(WARM + count):
        workflow_id = f"w{n}"
        if side == "app":
            start = workflow.prepare((n,), {}, tenant=None, timeout=None)
            await checkpointer.supply(workflow_id, layout.START, start)
        else:
            await checkpointer.supply(workflow_id, "input", n)
        holder = await checkpointer.claim(workflow_id, 3600.0, 30.0)
        assert holder is not None
        if run_them:
            body = workflow.body if side == "app" else engine_five
            outcome = await resume(holder, checkpointer, body)
            assert isinstance(outcome, Completed)
            if isinstance(outcome.value, Finish):
                await finish_workflow(checkpointer, holder, outcome.value.key, outcome.value.value)
            else:
                await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
        await checkpointer.release(holder)
    await app.close()


def counted(side: str, count: int, run_them: bool) -> int:
    """Instructions of one process running `passes`, as callgrind counts them."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "benchmarks.app_instructions",
        "--passes",
        side,
        str(count),
        "run" if run_them else "start-only",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_pass(side: str) -> float:
    """Instructions of one pass of ``side`` (its start, claim and release taken out)."""
    jobs = [(side, count, run) for run in (True, False) for count in (FEW, MANY)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        few_run, many_run, few_start, many_start = pool.map(lambda job: counted(*job), jobs)
    return ((many_run - few_run) - (many_start - few_start)) / (MANY - FEW)


def main() -> None:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: no instruction counts (apt-get install valgrind)")
        return
    engine, app = per_pass("engine"), per_pass("app")
    print(f"five-step pass on memory, ended as the Worker ends it ({MANY - FEW} passes)")
    print(f"  engine (run.step):          {engine:>12,.0f} instructions")
    print(f"  App (@app.workflow, step):  {app:>12,.0f} instructions")
    print(f"  App's own work:             {app - engine:>12,.0f} ({app / engine:.3f}x)")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--passes":
        asyncio.run(passes(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "run"))
    else:
        main()
