"""What OpenTelemetry's hooks cost a worker: claim+complete and step rates on the memory
backing (the one where durably's own Python is the whole cost, so a hook's share is
largest), with the hooks as they run

- ``off``: as without the ``otel`` extra (the switches read "off" for good);
- ``installed``: the extra installed and no provider configured (each hook checks);
- ``sdk, no exporter``: the SDK's providers set with no span processor and no metric
  reader (spans and measurements made, and dropped), measured last, since a process
  sets its providers once.

Rounds alternate ``off`` and ``installed``; the table shows medians and their ratio. Rates
are per second of this process's CPU time, which a loaded, shared machine disturbs far less
than wall time.
Run: ``python -m benchmarks otel``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

from benchmarks.app import STEPS, app_steps, register
from durably import App, WorkItem
from durably.clock import SystemClock
from durably.engine import Worker
from durably.memory import MemoryWorkQueue
from durably.otel import api

ITEMS = 3000
ROUNDS = 5


def _switch(mode: str) -> None:
    on = None if mode != "off" else False
    api._tracing = on  # None: checked at each hook; False: off for good
    api._metrics = on


async def claim_complete() -> float:
    """Items per second through a `Worker` over a memory queue (no-op handler)."""
    queue = MemoryWorkQueue(SystemClock())
    done = asyncio.Event()
    handled = 0

    async def handler(item: WorkItem) -> None:
        nonlocal handled
        handled += 1
        if handled == ITEMS:
            done.set()

    worker = Worker(poll_seconds=0.05, grace_seconds=1.0, maintenance_seconds=3600)
    worker.handle(queue, handler, name="bench", concurrency=20)
    for n in range(ITEMS):
        await queue.enqueue(WorkItem(id=f"i{n}", tenant="t", queue="bench"))
    started = time.process_time()
    serving = asyncio.create_task(worker.run(install_signal_handlers=False))
    await done.wait()
    while (await queue.stats(queue="bench")).claimed:
        await asyncio.sleep(0.001)
    elapsed = time.process_time() - started
    worker.stop()
    await serving
    return ITEMS / elapsed


async def step_rate(round: int) -> float:
    """``@app.step`` calls per second in one pass (memory)."""
    app = App("memory://")
    try:
        many, _ = register(app, round)
        await app_steps(app, many)  # warm
        started = time.process_time()
        await app_steps(app, many)
        return STEPS / (time.process_time() - started)
    finally:
        await app.close()


async def measure(modes: list[str], rounds: int) -> dict[str, dict[str, list[float]]]:
    figures: dict[str, dict[str, list[float]]] = {m: {"items": [], "steps": []} for m in modes}
    for round in range(rounds + 1):  # round 0 warms up
        order = modes if round % 2 == 0 else list(reversed(modes))
        for mode in order:
            _switch(mode)
            items = await claim_complete()
            steps = await step_rate(round * 10 + len(mode))
            if round:
                figures[mode]["items"].append(items)
                figures[mode]["steps"].append(steps)
    return figures


def _sdk_without_exporters() -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
    metrics.set_meter_provider(MeterProvider())


def main() -> None:
    if not api.INSTALLED:
        print("(the otel extra is not installed: nothing to compare)")
        return
    figures = asyncio.run(measure(["off", "installed"], ROUNDS))
    try:
        _sdk_without_exporters()
    except ImportError:
        print("(no OpenTelemetry SDK: the sdk row is left out)")
    else:
        _switch("installed")
        figures.update(asyncio.run(measure(["sdk, no exporter"], max(2, ROUNDS // 2))))
    base = {k: statistics.median(v) for k, v in figures["off"].items()}
    print(f"{'hooks':28} {'claim+complete/s':>17} {'ratio':>7} {'steps/s':>10} {'ratio':>7}")
    for mode, found in figures.items():
        items, steps = statistics.median(found["items"]), statistics.median(found["steps"])
        print(
            f"{mode:28} {items:17,.0f} {items / base['items']:7.3f} "
            f"{steps:10,.0f} {steps / base['steps']:7.3f}"
        )
    print(f"({ROUNDS} rounds, {ITEMS} items and {STEPS} steps a round; run {uuid.uuid4().hex[:6]})")


if __name__ == "__main__":
    main()
