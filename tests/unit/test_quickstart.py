"""docs/quickstart.md runs as written: its module, its client and its test, in order."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parents[2] / "docs" / "quickstart.md"


def blocks(kind: str) -> list[str]:
    text = QUICKSTART.read_text(encoding="utf-8")
    return re.findall(rf"```{kind}\n(.*?)```", text, re.DOTALL)


def run(code: str, directory: Path) -> str:
    finished = subprocess.run(
        [sys.executable, "-c", code],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    return finished.stdout


def test_every_python_block_of_the_quickstart_runs_and_prints_what_the_page_shows(
    tmp_path: Path,
) -> None:
    module, client, testing = blocks("python")
    shown = blocks("text")
    (tmp_path / "tickets.py").write_text(module, encoding="utf-8")
    assert run(client, tmp_path) == shown[0]
    assert run(testing, tmp_path) == shown[1]
