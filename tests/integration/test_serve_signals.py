"""`app.serve()` takes SIGINT/SIGTERM for its graceful shutdown (what `durably worker`
wants); with ``signals=False`` a program that serves beside its own work keeps them, and a
Ctrl-C interrupts it as it would without durably. Real processes, real signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PROGRAM = """
import asyncio, sys
import durably

app = durably.App(sys.argv[1])

@app.workflow(name="idle")
async def idle(ctx: durably.Context) -> None:
    return None

async def main() -> None:
    serving = asyncio.create_task(app.serve(signals=sys.argv[2] == "yes", grace=0.5))
    await asyncio.sleep(0.5)
    print("serving", flush=True)
    await asyncio.sleep(30)  # the program's own work
    print("own work done", flush=True)

asyncio.run(main())
"""


def _interrupted(tmp_path: Path, signals: str) -> subprocess.Popen[str]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    process = subprocess.Popen(
        [sys.executable, str(script), f"sqlite:///{tmp_path / 'app.db'}", signals],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "serving"
    process.send_signal(signal.SIGINT)
    return process


def test_with_signals_false_a_ctrl_c_interrupts_the_program(tmp_path: Path) -> None:
    process = _interrupted(tmp_path, "no")
    began = time.monotonic()
    process.wait(timeout=20)
    assert time.monotonic() - began < 10
    assert process.returncode != 0  # KeyboardInterrupt, not the end of its own work


def test_by_default_serve_takes_the_signal_and_the_program_runs_on(tmp_path: Path) -> None:
    process = _interrupted(tmp_path, "yes")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=3)  # the worker stopped; the program's work goes on
    finally:
        process.kill()
        process.wait()
