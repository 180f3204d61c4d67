"""One trace across processes and a crash: a workflow started inside a request's span by one
process, run by a worker killed with SIGKILL mid-step and finished by a second worker, is
one trace, whose every step hangs under the start span.

Run as a script, this module is one of those processes: ``python test_otel_traces.py start
DSN EFFECTS SPANS`` starts the workflow inside a span, ``... serve DSN EFFECTS SPANS``
serves it; each writes its spans to SPANS (`tests.span_files`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from durably import App, Context

LEASE = 1.0  # how soon a dead worker's workflow is taken over
ARMED = "armed"  # while this file exists beside the effects file, step 1 hangs
ROOT = Path(__file__).resolve().parents[2]


def build(dsn: str, effects: Path) -> App:
    """The App every process of this test registers alike."""
    app = App(dsn, lease=LEASE)

    @app.step(name="fetch")
    async def fetch(n: int) -> int:
        with effects.open("a") as sink:
            sink.write(f"fetch {n} {os.getpid()}\n")
        if n == 1 and (effects.parent / ARMED).exists():
            await asyncio.sleep(120)  # killed here
        return n

    @app.workflow(name="traced")
    async def traced(ctx: Context, count: int) -> int:
        total = 0
        for n in range(count):
            total += await fetch(n)
        doubled = await ctx.step("double", lambda: total * 2)
        noted: int = await ctx.transact("note", lambda cursor: 1)
        return int(doubled) + noted

    return app


def spawn(mode: str, dsn: str, effects: Path, spans: Path) -> subprocess.Popen[bytes]:
    log = spans.with_suffix(".log")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, __file__, mode, dsn, str(effects), str(spans)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )


async def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def fetched(effects: Path, n: int) -> int:
    if not effects.exists():
        return 0
    return sum(1 for line in effects.read_text().splitlines() if line.startswith(f"fetch {n} "))


async def test_a_workflow_killed_mid_step_and_finished_elsewhere_is_one_trace(
    tmp_path: Path,
) -> None:
    from tests.span_files import read_spans

    dsn = f"sqlite:///{tmp_path / 'app.db'}"
    effects = tmp_path / "effects.txt"
    files = [tmp_path / f"{name}.jsonl" for name in ("producer", "killed", "finisher")]
    starter = spawn("start", dsn, effects, files[0])
    assert starter.wait(timeout=60) == 0, files[0].with_suffix(".log").read_text()
    (tmp_path / ARMED).touch()
    first = spawn("serve", dsn, effects, files[1])
    try:
        await wait_for(lambda: fetched(effects, 1) == 1, "step 1 to start")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    (tmp_path / ARMED).unlink()
    second = spawn("serve", dsn, effects, files[2])
    try:
        async with build(dsn, effects) as app:
            handle = app.workflows["traced"].get_handle
            result = await (await handle("order-1")).result(timeout=90)
        assert result == (0 + 1 + 2) * 2 + 1
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=60) == 0

    producer, killed, finisher = (read_spans([path]) for path in files)
    everything = producer + killed + finisher
    (request,) = [s for s in producer if s["name"] == "POST /orders"]
    (start,) = [s for s in producer if s["name"] == "start traced"]
    assert start["parent_id"] == request["span_id"]
    assert start["kind"] == "PRODUCER"
    assert start["attributes"]["messaging.system"] == "durably"
    assert start["attributes"]["durably.workflow.id"] == "order-1"
    # One trace across the three processes, the killed one included.
    assert {s["trace_id"] for s in everything} == {request["trace_id"]}
    assert [s["attributes"]["durably.step.key"] for s in killed] == ["fetch#1"]  # step 0 ended

    # The finishing worker's pass continues the trace under the start span...
    (finishing,) = [s for s in finisher if s["name"] == "process traced"]
    assert finishing["parent_id"] == start["span_id"]
    assert finishing["kind"] == "CONSUMER"
    assert finishing["attributes"]["durably.outcome"] == "completed"
    # ...and every step of the workflow is a child of that pass: replayed or performed.
    children = [s for s in finisher if s["parent_id"] == finishing["span_id"]]
    steps = {s["attributes"]["durably.step.key"]: s["attributes"] for s in children}
    assert sorted(s["name"] for s in children) == [
        "step double",
        "step fetch",
        "step fetch",
        "step fetch",
        "transact note",
    ]
    assert set(steps) == {"fetch#1", "fetch#2", "fetch#3", "double", "note"}
    assert steps["fetch#1"]["durably.step.replayed"] is True  # recorded before the kill
    assert steps["fetch#2"]["durably.step.performed"] is True  # cut by the kill: run again
    for attributes in steps.values():
        assert attributes["durably.workflow.id"] == "order-1"
        assert attributes["durably.workflow.kind"] == "traced"
        assert attributes["durably.step.outcome"] == "ok"
    assert steps["fetch#3"]["durably.step.attempt"] == 1
    assert steps["fetch#1"]["durably.step.attempt"] == 0  # replayed: no attempt made
    # The worker's JSON log line about the pass carries the trace and the pass's span.
    logged = [json.loads(line) for line in files[2].with_suffix(".json").read_text().splitlines()]
    (completed,) = [line for line in logged if line["message"].startswith("workflow 'order-1'")]
    assert completed["message"].startswith("workflow 'order-1' completed")
    assert (completed["trace_id"], completed["span_id"]) == (
        request["trace_id"],
        finishing["span_id"],
    )


async def _start(dsn: str, effects: Path) -> None:
    from opentelemetry import trace

    async with build(dsn, effects) as app:
        with trace.get_tracer("shop").start_as_current_span("POST /orders"):
            await app.workflows["traced"].start(3, id="order-1")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from durably.logging import JsonFormatter
    from tests.span_files import trace_to

    mode, dsn, effects_path, spans_path = sys.argv[1:5]
    trace_to(Path(spans_path))
    lines = logging.FileHandler(Path(spans_path).with_suffix(".json"))
    lines.setFormatter(JsonFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[lines])
    if mode == "start":
        asyncio.run(_start(dsn, Path(effects_path)))
    else:
        asyncio.run(build(dsn, Path(effects_path)).serve(grace=0.2))
