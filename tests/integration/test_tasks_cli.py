"""`durably tasks enqueue` and `durably worker --queue` through real subprocesses: a task
queued from the command line runs in a worker process serving only its queue."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def test_queue_list_shows_every_queue_and_purge_empties_one(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(MODULE)
    dsn = f"sqlite:///{tmp_path / 'list.db'}"
    for text in ("a", "b", "c"):
        queued = run(tmp_path, "tasks", "enqueue", "jobs:note", "--args", f'["{text}"]', dsn=dsn)
        assert queued.returncode == 0, queued.stderr
    listed = run(tmp_path, "queue", "list", dsn=dsn)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["queue", "depth", "running", "dead", "oldest"]
    assert lines[-1].split()[:4] == ["notes", "3", "0", "0"]
    purged = run(tmp_path, "queue", "purge", "notes", dsn=dsn)
    assert purged.returncode == 0, purged.stderr
    assert "purged 3 queued item(s) of queue 'notes'" in purged.stdout
    after = run(tmp_path, "queue", "list", dsn=dsn)
    assert after.returncode == 0, after.stderr
    assert "notes" not in after.stdout or after.stdout.splitlines()[-1].split()[1] == "0"


async def test_queue_list_shows_a_dash_for_the_age_of_a_queue_with_nothing_queued(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from durably.cli import main
    from durably.stores import open_stores
    from durably.stores.work import WorkItem

    dsn = f"sqlite:///{tmp_path / 'dash.db'}"
    stores = await open_stores(dsn)
    try:
        await stores.migrate()
        await stores.queue.enqueue(WorkItem(id="x", tenant="t", queue="idle"))
        await stores.queue.enqueue(WorkItem(id="y", tenant="t", queue="busy"))
        taken = await stores.queue.claim(worker="w", queue="idle")
        assert taken is not None
        await stores.queue.fail("x", tenant="t", worker="w", error="e", retryable=False)
    finally:
        await stores.close()
    assert await asyncio.to_thread(main, ["queue", "list", "--dsn", dsn]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows[0][0] == "busy"
    assert rows[0][1:4] == ["1", "0", "0"]
    assert rows[0][4].endswith("s")
    assert rows[1] == ["idle", "0", "0", "1", "-"]
