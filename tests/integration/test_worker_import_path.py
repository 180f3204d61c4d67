"""``durably worker MODULE:APP`` imports MODULE without letting a file in the current
directory shadow a module the worker imports: a planted ``sqlite3.py`` or ``psycopg.py``
next to the code never runs. ``--app-dir`` names where the code lives instead."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from durably import App, Context
from tests.pg_service import create_database
from tests.unit.test_cli_worker_app import FLOWS, SRC

PLANTED = """
from pathlib import Path

Path(__file__).with_name("planted-module-ran").write_text(__name__)
raise SystemExit("a planted module ran in place of the real one")
"""


def _worker(cwd: Path, dsn: str, *argv: str) -> subprocess.Popen[bytes]:
    # -P: no directory first on the path but the ones named, as with the ``durably``
    # command (``python -m`` alone would put the current directory first itself).
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "durably", "worker", *argv, "--log-level", "WARNING"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": SRC, "DURABLY_DSN": dsn},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


async def _doubled_by(process: subprocess.Popen[bytes], dsn: str) -> tuple[int, str]:
    """What a workflow the worker serves returns, then the worker's output after SIGTERM."""
    app = App(dsn)

    @app.workflow(name="double")
    async def double(ctx: Context, n: int) -> int:
        raise NotImplementedError  # runs in the worker

    try:
        async with app:
            handle = await double.start(21)
            waiting = asyncio.create_task(handle.result(timeout=60))
            while not waiting.done() and process.poll() is None:
                await asyncio.wait([waiting], timeout=0.1)
            if not waiting.done():
                waiting.cancel()
                output = process.communicate(timeout=30)[0].decode()
                raise AssertionError(f"the worker exited:\n{output}")
            doubled = await waiting
        process.send_signal(signal.SIGTERM)
        return doubled, process.communicate(timeout=30)[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("shadowed", ["sqlite3", "psycopg"])
async def test_a_module_planted_in_the_current_directory_never_runs(
    tmp_path: Path, shadowed: str
) -> None:
    dsn = f"sqlite:///{tmp_path / 'app.db'}" if shadowed == "sqlite3" else create_database()
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    (tmp_path / f"{shadowed}.py").write_text(textwrap.dedent(PLANTED))
    doubled, output = await _doubled_by(_worker(tmp_path, dsn, "flows:app"), dsn)
    assert doubled == 42  # the target itself was found in the current directory
    assert not (tmp_path / "planted-module-ran").exists(), output
    assert "Traceback" not in output


async def test_app_dir_names_the_directory_the_target_is_imported_from(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "flows.py").write_text(textwrap.dedent(FLOWS))
    dsn = f"sqlite:///{tmp_path / 'app.db'}"
    process = _worker(tmp_path, dsn, "flows:app", "--app-dir", "code")
    doubled, output = await _doubled_by(process, dsn)
    assert doubled == 42
    assert "Traceback" not in output


def test_an_app_dir_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    process = _worker(
        tmp_path, f"sqlite:///{tmp_path / 'app.db'}", "flows:app", "--app-dir", "nope"
    )
    output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 2, output
    assert "--app-dir 'nope' is not a directory" in output
