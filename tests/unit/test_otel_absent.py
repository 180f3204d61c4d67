"""Without OpenTelemetry (or without a provider) every hook is a no-op, and the metrics
endpoint refuses bad input before it binds anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from durably.errors import InvalidInputError
from durably.otel import serve_prometheus
from durably.otel.instruments import OTHER, BoundedLabels

ROOT = Path(__file__).resolve().parents[2]

ABSENT = """
import asyncio, sys
sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
import durably
from durably.otel import INSTALLED, enqueuing, metrics_on, tracing_on, serve_prometheus
from durably.errors import ConfigurationError

app = durably.App("memory://")

@app.step(name="double")
async def double(n: int) -> int:
    return n * 2

@app.workflow(name="twice")
async def twice(ctx: durably.Context, n: int) -> int:
    return await double(n) + await ctx.step("one", lambda: 1)

async def main() -> None:
    async with app:
        handle = await twice.start(20)
        await app.run_until_idle()
        print(await handle.result(timeout=5))
    item = durably.WorkItem(id="a", tenant="t")
    with enqueuing(item) as same:
        assert same is item
    try:
        serve_prometheus(0)
    except ConfigurationError as exc:
        print("refused:", "prometheus extra" in str(exc))

print(INSTALLED, tracing_on(), metrics_on())
asyncio.run(main())
"""


def test_without_opentelemetry_workflows_run_and_every_hook_is_a_no_op() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ABSENT],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT / "src")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False False False", "41", "refused: True"]


@pytest.mark.parametrize("port", [-1, 65536, "9464", 1.5, True])
def test_a_bad_metrics_port_is_refused_before_anything_binds(port: object) -> None:
    with pytest.raises(InvalidInputError, match="port"):
        serve_prometheus(port)  # type: ignore[arg-type]


def test_a_bad_metrics_host_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="host"):
        serve_prometheus(0, "")


def test_labels_past_the_bound_read_other() -> None:
    labels = BoundedLabels(2)
    assert [labels(t) for t in ("a", "b", "c", "a", "d", "b")] == ["a", "b", OTHER, "a", OTHER, "b"]
    labels.reset(limit=1)
    assert [labels(t) for t in ("c", "a")] == ["c", OTHER]
