"""``durably schedules list`` prints the schedules a module registers, and refuses a
target that holds none with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durably.cli import main

MODULE = """
from durably.engine import Schedule, Worker
from durably.memory.queue import MemoryWorkQueue

worker = Worker(name="w")
queue = MemoryWorkQueue()
worker.schedule(queue, Schedule("report", "30 6 * * *", tz="Europe/Berlin"))
worker.schedule(queue, Schedule("sweep", "*/15 * * * *", queue="maint"))
"""


def test_the_schedules_of_a_worker_are_listed_with_their_next_tick(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "flowjobs.py").write_text(MODULE)
    assert main(["schedules", "list", "flowjobs:worker", "--app-dir", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(row["name"], row["cron"], row["tz"], row["queue"]) for row in listed] == [
        ("report", "30 6 * * *", "Europe/Berlin", "default"),
        ("sweep", "*/15 * * * *", "UTC", "maint"),
    ]
    assert listed[0]["next"].endswith(("T06:30:00+01:00", "T06:30:00+02:00"))


def test_a_target_without_schedules_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "flowjobs2.py").write_text(MODULE)
    with pytest.raises(SystemExit) as exited:
        main(["schedules", "list", "flowjobs2:queue", "--app-dir", str(tmp_path)])
    assert exited.value.code == 2
