"""Handles waiting for results, on every backing: woken by the store's announcements.

Three figures per backing:

- start-to-result latency of a one-step workflow with a worker already serving
  (``handle = await wf.start(); await handle.result()``), p50 and p99 over ``RUNS`` runs,
  as a ratio to one plain round trip of the backing (a committed write of one record; a
  one-step workflow needs at least five round trips: start, claim, record, finish, read);
- ``WORKFLOWS`` five-step workflows started and every handle awaited at once
  (``app.serve()`` beside ``asyncio.gather(*(h.result() ...))``, timed to the last result)
  against the same workflows through the engine's `Worker` (timed to the last completion
  it reports), as workflows per second and their ratio;
- the store reads per second of ``WAITERS`` handles waiting on workflows that do not end
  (counted by a wrapper over the checkpointer's reads, over ``IDLE_SECONDS``).

Run with ``python -m benchmarks.waiters [memory sqlite postgres redis]``.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import sys
import time
import uuid
from collections import Counter
from typing import Any

from benchmarks.app import FIVE, Completions, dsn_for, engine_workflows
from durably import App, Context, Topic
from durably.engine.worker import LOGGER_NAME

RUNS = 200
WORKFLOWS = 500
WAITERS = 1000
IDLE_SECONDS = 5.0
TRIPS = 200
BACKINGS = ("memory", "sqlite", "postgres", "redis")
READS = ("look", "get_status", "peek", "load", "history")
NEVER = Topic("never", str)


async def round_trip(app: App) -> float:
    """The median seconds of one plain store round trip: a committed write (a record
    supplied to a workflow of its own), as most of a workflow's round trips are."""
    checkpointer = (await app.stores()).checkpointer
    times = []
    for n in range(TRIPS):
        started = time.perf_counter()
        await checkpointer.supply(f"trip-{uuid.uuid4().hex}", f"trip-{n}", n)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def latencies(app: App) -> list[float]:
    """Start-to-result seconds of ``RUNS`` one-step workflows, a worker serving."""

    @app.step(name="one")
    async def one() -> int:
        return 1

    @app.workflow(name="one-step")
    async def single(ctx: Context) -> int:
        return await one()

    serving = asyncio.create_task(app.serve(workflows=[single.kind], signals=False))
    try:
        await asyncio.sleep(0.5)  # serving, listening
        times = []
        for _ in range(RUNS):
            started = time.perf_counter()
            handle = await single.start()
            await handle.result(timeout=30)
            times.append(time.perf_counter() - started)
        return sorted(times)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)


async def awaited_rate(app: App) -> float:
    """Five-step workflows per second, every handle awaited at once beside ``serve``."""
    kind = f"five-{uuid.uuid4().hex[:8]}"

    @app.step(name=f"{kind}-step")
    async def step(n: int) -> dict[str, int]:
        return {"n": n}

    @app.workflow(name=kind)
    async def five(ctx: Context, n: int) -> int:
        for m in range(FIVE):
            await step(m)
        return FIVE

    handles = [await five.start(n) for n in range(WORKFLOWS)]
    started = time.perf_counter()
    serving = asyncio.create_task(app.serve(workflows=[kind], grace=1.0, signals=False))
    try:
        results = await asyncio.gather(*(handle.result(timeout=600) for handle in handles))
        assert results == [FIVE] * WORKFLOWS
        return WORKFLOWS / (time.perf_counter() - started)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)


async def idle_reads(app: App) -> float:
    """Store reads per second of ``WAITERS`` handles waiting on workflows never ending."""

    @app.workflow(name="forever")
    async def forever(ctx: Context) -> str:
        return str(await ctx.recv(NEVER))

    handles = [await forever.start() for _ in range(10)]
    waiting = [asyncio.create_task(handles[n % 10].result(timeout=600)) for n in range(WAITERS)]
    try:
        await asyncio.sleep(1.0)  # the first looks are over
        checkpointer: Any = (await app.stores()).checkpointer
        counts: Counter[str] = Counter()
        for name in READS:
            method = getattr(checkpointer, name)

            def counted(*args: Any, _m: Any = method, _n: str = name, **kwargs: Any) -> Any:
                counts[_n] += 1
                return _m(*args, **kwargs)

            setattr(checkpointer, name, counted)
        await asyncio.sleep(IDLE_SECONDS)
        return sum(counts.values()) / IDLE_SECONDS
    finally:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)


async def measure(backing: str) -> None:
    async with dsn_for(backing) as dsn:
        if dsn is None:
            print(f"{backing}: unreachable; skipped")
            return
        app = App(dsn)
        completions = Completions()
        logger = logging.getLogger(LOGGER_NAME)
        logger.setLevel(logging.INFO)
        logger.addHandler(completions)
        logger.propagate = False
        try:
            trip = await round_trip(app)
            times = await latencies(app)
            p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99) - 1]
            print(
                f"{backing + ': start-to-result of a one-step workflow':52} "
                f"p50 {p50 * 1e3:7.2f} ms ({p50 / trip:5.1f}x a round trip of "
                f"{trip * 1e3:.2f} ms), p99 {p99 * 1e3:7.2f} ms ({p99 / trip:5.1f}x)",
                flush=True,
            )
            ours = await awaited_rate(app)
            engine = await engine_workflows(app, completions)
            print(
                f"{backing + f': {WORKFLOWS} five-step, handles awaited (wf/s)':52} "
                f"App {ours:7.1f}, Worker {engine:7.1f}, ratio {ours / engine:5.2f}x",
                flush=True,
            )
            reads = await idle_reads(app)
            print(
                f"{backing + f': {WAITERS} waiting handles (reads/s)':52} {reads:7.2f}",
                flush=True,
            )
        finally:
            logger.removeHandler(completions)
            logger.propagate = True
            await app.close()


async def run(backings: list[str]) -> None:
    for backing in backings:
        await measure(backing)


def main(argv: list[str] | None = None) -> None:
    """Print the waiter figures for the backings named (all by default)."""
    names = list(argv or [])
    asyncio.run(run(names or list(BACKINGS)))


if __name__ == "__main__":
    main(sys.argv[1:])
