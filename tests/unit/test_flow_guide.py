"""The flow-control guide's examples run as written and print what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "flow-control.md"


def printed(program: str, where: Path) -> str:
    """What ``program`` prints, run in a fresh interpreter in ``where``; it must succeed."""
    finished = subprocess.run(
        [sys.executable, "-c", program],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    return finished.stdout


def test_the_flow_control_guides_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    program = re.findall(r"```python\n(.*?)```", text, re.DOTALL)[0]
    shown = re.findall(r"```text\n(.*?)```", text, re.DOTALL)[0]
    assert printed(program, tmp_path) == shown


def test_the_flow_control_guides_workflow_example_prints_what_the_page_shows(
    tmp_path: Path,
) -> None:
    text = PAGE.read_text(encoding="utf-8")
    program = next(
        block
        for block in re.findall(r"```python\n(.*?)```", text, re.DOTALL)
        if "debounce=" in block
    )
    shown = re.findall(r"```text\n(.*?)```", text, re.DOTALL)[1]
    assert printed(program, tmp_path) == shown


def test_the_flow_control_guides_priority_example_prints_what_the_page_shows(
    tmp_path: Path,
) -> None:
    text = PAGE.read_text(encoding="utf-8")
    program = next(
        block
        for block in re.findall(r"```python\n(.*?)```", text, re.DOTALL)
        if "priority=" in block
    )
    shown = next(
        block
        for block in re.findall(r"```text\n(.*?)```", text, re.DOTALL)
        if block.startswith("shard 99")
    )
    assert printed(program, tmp_path) == shown


def test_the_flow_control_guides_priority_change_example_prints_what_the_page_shows(
    tmp_path: Path,
) -> None:
    text = PAGE.read_text(encoding="utf-8")
    program = next(
        block
        for block in re.findall(r"```python\n(.*?)```", text, re.DOTALL)
        if "set_priority(" in block
    )
    shown = next(
        block
        for block in re.findall(r"```text\n(.*?)```", text, re.DOTALL)
        if block.startswith("d, a")
    )
    assert printed(program, tmp_path) == shown
