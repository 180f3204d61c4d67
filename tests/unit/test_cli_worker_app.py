"""``durably worker MODULE:APP``: a `durably.App` served from the command line."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from durably import App, Context

SRC = str(Path(__file__).resolve().parents[2] / "src")

FLOWS = """
import durably

app = durably.App()

@app.workflow(name="double")
async def double(ctx: durably.Context, n: int) -> int:
    return n * 2

@app.workflow(name="never")
async def never(ctx: durably.Context, n: int) -> int:
    return n
"""


def worker(tmp_path: Path, *argv: str) -> subprocess.Popen[bytes]:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    env = {**os.environ, "PYTHONPATH": SRC, "DURABLY_DSN": f"sqlite:///{tmp_path / 'app.db'}"}
    return subprocess.Popen(
        [sys.executable, "-m", "durably", "worker", "flows:app", *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_the_worker_command_serves_an_app_and_only_the_kinds_named(tmp_path: Path) -> None:
    process = worker(tmp_path, "--workflow", "double", "--log-level", "WARNING")

    async def use() -> tuple[int, str]:
        app = App(f"sqlite:///{tmp_path / 'app.db'}")

        # A producer registers the same kinds (their bodies run in the worker).
        @app.workflow(name="double")
        async def double(ctx: Context, n: int) -> int:
            raise NotImplementedError

        @app.workflow(name="never")
        async def never(ctx: Context, n: int) -> int:
            raise NotImplementedError

        async with app:
            doubled = await (await double.start(21)).result(timeout=30)
            waiting = await never.start(1)
            await asyncio.sleep(0.5)
            return doubled, (await waiting.status()).status.value

    try:
        doubled, status = asyncio.run(use())
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert doubled == 42
    assert status == "pending"  # its kind is not served by this worker
    assert process.returncode == 0, output
    assert "Traceback" not in output


def test_an_unknown_kind_is_refused_with_its_name(tmp_path: Path) -> None:
    process = worker(tmp_path, "--workflow", "nosuch")
    output = process.communicate(timeout=30)[0].decode()
    assert process.returncode != 0
    assert "nosuch" in output
    assert "Traceback" not in output
