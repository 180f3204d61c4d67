"""The operating guide's example runs as written and prints what the page shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.unit.test_guides import blocks

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_the_operating_guides_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    program = next(block for block in blocks("operating.md", "python") if "asyncio.run" in block)
    shown = next(block for block in blocks("operating.md", "text") if "sleeping" in block)
    (tmp_path / "example.py").write_text(program, encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": SRC},
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == shown
