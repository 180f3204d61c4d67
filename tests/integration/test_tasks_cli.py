"""`durably tasks enqueue` and `durably worker --queue` through real subprocesses: a task
queued from the command line runs in a worker process serving only its queue."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

MODULE = """
from pathlib import Path
import durably

app = durably.App()
LEDGER = Path(__file__).with_name("ledger.txt")


@app.task(name="note", queue="notes")
async def note(text: str, times: int = 1) -> None:
    with LEDGER.open("a") as ledger:
        ledger.write(text * times + "\\n")
"""


def run(tmp_path: Path, *argv: str, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DURABLY_DSN": dsn, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "durably", *argv, "--app-dir", str(tmp_path)]
        if argv[0] == "tasks"
        else [sys.executable, "-m", "durably", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )


def test_a_task_enqueued_from_the_command_line_runs_in_a_worker_serving_its_queue(
    tmp_path: Path,
) -> None:
    (tmp_path / "jobs.py").write_text(MODULE)
    dsn = f"sqlite:///{tmp_path / 'cli.db'}"
    queued = run(tmp_path, "tasks", "enqueue", "jobs:note", "--args", '["ab", 2]', dsn=dsn)
    assert queued.returncode == 0, queued.stderr
    assert "queued" in queued.stdout
    assert "'notes'" in queued.stdout
    by_name = run(tmp_path, "tasks", "enqueue", "jobs:note", "--args", '{"text": "c"}', dsn=dsn)
    assert by_name.returncode == 0, by_name.stderr
    bad = run(tmp_path, "tasks", "enqueue", "jobs:note", "--args", '["a", "x"]', dsn=dsn)
    assert bad.returncode != 0
    assert "times" in bad.stderr
    env = {**os.environ, "DURABLY_DSN": dsn, "PYTHONPATH": os.pathsep.join(sys.path)}
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durably",
            "worker",
            "jobs:app",
            "--queue",
            "notes",
            "--app-dir",
            str(tmp_path),
            "--poll-seconds",
            "0.1",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ledger = tmp_path / "ledger.txt"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ledger.exists() and len(ledger.read_text().splitlines()) >= 2:
                break
            time.sleep(0.1)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert sorted(ledger.read_text().splitlines()) == ["abab", "c"], err.decode()
