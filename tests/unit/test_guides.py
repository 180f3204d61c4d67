"""The code blocks of the guides run as written: the testing guide's example is a pytest
module whose tests pass, the large-values guide's App example prints what the page shows,
and the conformance example subclasses a suite pytest collects."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def blocks(page: str, kind: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return re.findall(rf"```{kind}\n(.*?)```", text, re.DOTALL)


def run(argv: list[str], directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def pytest_argv(name: str) -> list[str]:
    return ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto", name]


def test_the_testing_guides_example_is_a_test_module_whose_tests_pass(tmp_path: Path) -> None:
    example = next(block for block in blocks("testing.md", "python") if "async def test_" in block)
    (tmp_path / "test_orders.py").write_text(example, encoding="utf-8")
    finished = run(pytest_argv("test_orders.py"), tmp_path)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "2 passed" in finished.stdout


def test_the_conformance_example_of_the_testing_guide_is_collected_and_passes(
    tmp_path: Path,
) -> None:
    example = next(block for block in blocks("testing.md", "python") if "Conformance)" in block)
    (tmp_path / "test_my_state.py").write_text(example, encoding="utf-8")
    finished = run(pytest_argv("test_my_state.py"), tmp_path)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert re.search(r"\d+ passed", finished.stdout)


def test_the_large_values_guides_app_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    program = blocks("large-values.md", "python")[0]
    shown = blocks("large-values.md", "text")[0]
    finished = run(["-c", program], tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == shown
