"""The flow-control guide's example runs as written and prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "flow-control.md"


def test_the_flow_control_guides_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    program = re.findall(r"```python\n(.*?)```", text, re.DOTALL)[0]
    shown = re.findall(r"```text\n(.*?)```", text, re.DOTALL)[0]
    finished = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == shown
