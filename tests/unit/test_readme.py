"""The README's tour runs exactly as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_tour_runs_as_written() -> None:
    text = README.read_text(encoding="utf-8")
    tour = text.split("## A tour", 1)[1]
    match = re.search(r"```python\n(.*?)```", tour, re.DOTALL)
    assert match is not None, "the tour has no python block"
    code = match.group(1)
    assert len(code.splitlines()) <= 30
    namespace: dict[str, object] = {"__name__": "readme_tour"}
    exec(compile(code, str(README), "exec"), namespace)
