"""The code blocks of the guides run as written: the testing guide's example is a pytest
module whose tests pass, its replay example passes over a history saved from a store, the
large-values guide's App example prints what the page shows, and the conformance example
subclasses a suite pytest collects."""

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


SHOP = """
import durably

app = durably.App("memory://")
SHIPPED = durably.Topic("shipped", str)


@app.step()
async def charge(order_id: str) -> str:
    return f"charged {order_id}"


@app.workflow(name="shop.fulfil")
async def fulfil(ctx: durably.Context, order_id: str) -> str:
    receipt = await charge(order_id)
    return f"{receipt}, shipped as {await ctx.recv(SHIPPED)}"
"""

SAVE_A_HISTORY = """
import asyncio
from pathlib import Path

import durably.testing
from shop.workflows import app, fulfil


async def main() -> None:
    app.dsn = "sqlite:///shop.db"
    async with app:
        await fulfil.start("o-1", id="o-1")
        await app.run_until_idle(advance=False)
    histories = await durably.testing.in_flight_histories("sqlite:///shop.db")
    Path("tests/histories").mkdir(parents=True)
    Path("tests/histories/o-1.json").write_text(histories[0].to_json(), encoding="utf-8")


asyncio.run(main())
"""


def test_the_testing_guides_replay_example_passes_over_a_saved_history(tmp_path: Path) -> None:
    example = next(block for block in blocks("testing.md", "python") if "assert_replays" in block)
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "shop" / "workflows.py").write_text(SHOP, encoding="utf-8")
    saved = run(["-c", SAVE_A_HISTORY], tmp_path)
    assert saved.returncode == 0, saved.stderr
    (tmp_path / "test_deploy.py").write_text(example, encoding="utf-8")
    finished = run(pytest_argv("test_deploy.py"), tmp_path)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "1 passed" in finished.stdout


def test_the_observability_guides_tracing_example_prints_the_spans_it_shows(
    tmp_path: Path,
) -> None:
    program = next(b for b in blocks("observability.md", "python") if "InMemorySpanExporter" in b)
    shown = next(b for b in blocks("observability.md", "text") if b.startswith("start hello"))
    (tmp_path / "spans.py").write_text(program, encoding="utf-8")
    finished = run(["spans.py"], tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == shown
