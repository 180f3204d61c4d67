"""``durably worker MODULE:APP``: a `durably.App` served from the command line."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from durably import App, Context, ManualClock, WorkflowStatus
from durably.cli import main

T = TypeVar("T")

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


def worker(
    tmp_path: Path, *argv: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    env = {
        **os.environ,
        "PYTHONPATH": SRC,
        "DURABLY_DSN": f"sqlite:///{tmp_path / 'app.db'}",
        **(env or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "durably", "worker", "flows:app", *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def run_then_stop(
    process: subprocess.Popen[bytes], use: Callable[[], Coroutine[Any, Any, T]]
) -> tuple[T, str]:
    """What ``use()`` returns while the worker runs, then the worker's output after a
    SIGTERM (the worker is killed if the test fails first)."""
    try:
        value = asyncio.run(use())
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return value, output


async def doubled_by_the_worker(database: Path, n: int) -> int:
    """``n`` doubled by the ``double`` workflow a worker serves from SQLite ``database``."""
    app = App(f"sqlite:///{database}")

    @app.workflow(name="double")
    async def double(ctx: Context, n: int) -> int:
        raise NotImplementedError  # its body runs in the worker

    async with app:
        return await (await double.start(n)).result(timeout=30)


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

    (doubled, status), output = run_then_stop(process, use)
    assert doubled == 42
    assert status == "pending"  # its kind is not served by this worker
    assert process.returncode == 0, output
    assert "Traceback" not in output


def test_the_worker_command_gives_an_app_its_name_and_poll_options(tmp_path: Path) -> None:
    process = worker(
        tmp_path, "--name", "night-shift-1", "--poll-seconds", "0.2", "--maintenance-seconds", "0.3"
    )

    async def use() -> int:
        return await doubled_by_the_worker(tmp_path / "app.db", 4)

    doubled, output = run_then_stop(process, use)
    assert doubled == 8
    assert process.returncode == 0, output
    assert "worker='night-shift-1'" in output
    assert "Traceback" not in output


def test_the_worker_command_serves_an_app_from_the_dsn_it_is_given(tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"  # not the App's own ($DURABLY_DSN)
    process = worker(tmp_path, "--dsn", other, "--log-level", "INFO")

    async def use() -> int:
        app = App(other)

        @app.workflow(name="double")
        async def double(ctx: Context, n: int) -> int:
            raise NotImplementedError

        async with app:
            return await (await double.start(5)).result(timeout=30)

    doubled, output = run_then_stop(process, use)
    assert doubled == 10
    assert process.returncode == 0, output
    assert f"from sqlite {tmp_path / 'other.db'}" in output
    assert "Traceback" not in output


def test_an_unknown_kind_is_refused_with_its_name(tmp_path: Path) -> None:
    process = worker(tmp_path, "--workflow", "nosuch")
    output = process.communicate(timeout=30)[0].decode()
    assert process.returncode != 0
    assert "nosuch" in output
    assert "Traceback" not in output


def test_a_mistyped_kind_is_refused_with_a_close_match_and_the_registered_kinds(
    tmp_path: Path,
) -> None:
    process = worker(tmp_path, "--workflow", "doubel")
    output = process.communicate(timeout=30)[0].decode()
    assert process.returncode != 0
    assert (
        "unknown workflow kind 'doubel' (did you mean 'double'?); registered: double, never"
        in output
    )


def test_a_worker_on_a_relative_sqlite_path_logs_the_file_and_that_it_made_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "elsewhere").mkdir()
    process = worker(tmp_path / "elsewhere", env={"DURABLY_DSN": "sqlite:///app.db"})
    database = tmp_path / "elsewhere" / "app.db"

    async def use() -> int:
        for _ in range(600):  # until the worker made it (30 s at most)
            if database.exists():
                break
            await asyncio.sleep(0.05)
        return await doubled_by_the_worker(database, 5)

    doubled, output = run_then_stop(process, use)
    assert doubled == 10
    assert f"serving flows:app from sqlite {database}" in output
    assert f"created a new, empty SQLite database {database}" in output


def test_workflows_resume_makes_a_parked_workflow_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = f"sqlite:///{tmp_path / 'app.db'}"
    deployed = {"argument": 1}

    def make() -> tuple[App, Any]:
        app = App(dsn, clock=ManualClock())

        @app.step(name="fetch")
        async def fetch(n: int) -> int:
            return n

        @app.workflow(name="changing")
        async def changing(ctx: Context) -> int:
            value = await fetch(deployed["argument"])
            await ctx.sleep(60)
            return value

        return app, changing

    async def park() -> str:
        app, changing = make()
        async with app:
            handle = await changing.start()
            await app.run_until_idle(advance=False)
            deployed["argument"] = 2  # the deploy that parks it
            await app.run_until_idle()
            assert (await handle.status()).status is WorkflowStatus.PARKED
            return str(handle.id)

    workflow = asyncio.run(park())
    assert main(["workflows", "resume", workflow, "--dsn", dsn]) == 0
    assert "resumed" in capsys.readouterr().out
    assert main(["workflows", "resume", workflow, "--dsn", dsn]) == 1  # pending now

    async def finish() -> int:
        deployed["argument"] = 1  # the fix
        app, changing = make()
        async with app:
            await app.run_until_idle()
            return int(await (await changing.get_handle(workflow)).result(timeout=5))

    assert asyncio.run(finish()) == 1
