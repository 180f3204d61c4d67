"""Handles waiting for results, on every backing: woken by the store's announcements.

Three figures per backing, each beside its target and the ceiling measured in the same run:

- start-to-result latency of a one-step workflow with a worker already serving
  (``handle = await wf.start(); await handle.result()``), p50 and p99 over ``RUNS`` runs,
  as a ratio to one plain round trip of the backing (a committed write of one record; a
  one-step workflow needs at least five round trips: start, claim, record, finish, read).
  Its ceiling: the engine's own start-to-finish of the same one-step workflow through a
  `Worker` (`start_workflow`, timed to the worker's report that it completed, nothing
  read back), the runs of the two taken in turn;
- ``WORKFLOWS`` five-step workflows started and every handle awaited at once
  (``app.serve()`` beside ``asyncio.gather(*(h.result() ...))``, timed to the last result)
  against the same workflows through the engine's `Worker` (timed to the last completion
  it reports), as workflows per second and their ratio; its ceiling is ``app.serve()``
  alone over the same workflows (timed to its last completion, no handle awaited): what
  the App's passes cost before any handle waits. Medians of ``ROUNDS`` rounds, the three
  drains of a round in a rotating order;
- the store reads per second of ``WAITERS`` handles waiting on workflows that do not end
  (counted by a wrapper over the checkpointer's reads, over ``IDLE_SECONDS``).

Run with ``python -m benchmarks.waiters [memory sqlite postgres redis]``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import statistics
import sys
import time
import uuid
from collections import Counter
from typing import Any

from benchmarks.app import FIVE, Completions, app_workflows, dsn_for, engine_workflows
from durably import App, Context, Topic
from durably.engine.runtime import Execution
from durably.engine.worker import LOGGER_NAME, Worker, start_workflow

RUNS = 200
WORKFLOWS = 500
ROUNDS = 3
LATENCY_TARGET = 10.0
"""Start-to-result p50 within this many plain round trips."""
AWAITED_TARGET = 0.9
"""Awaited handles at this share of the Worker's rate, or more."""
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


class Finished(logging.Handler):
    """Set when the worker reports workflow ``workflow`` completed (another's report, such
    as the App's pass logging after its handle returned, does not count)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.workflow = ""
        self.done = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if str(record.msg).startswith("workflow %r completed") and args[:1] == (self.workflow,):
            self.done.set()

    def expect(self, workflow: str) -> None:
        self.workflow, self.done = workflow, asyncio.Event()


async def latencies(app: App) -> tuple[list[float], list[float]]:
    """Start-to-result seconds of ``RUNS`` one-step workflows, a worker serving; and
    start-to-finish seconds of as many through the engine's `Worker`, taken in turn."""

    @app.step(name="one")
    async def one() -> int:
        return 1

    @app.workflow(name="one-step")
    async def single(ctx: Context) -> int:
        return await one()

    async def engine_one(run: Execution) -> int:
        return int(await run.step("one", functools.partial(int, 1)))

    kind = f"engine-one-{uuid.uuid4().hex[:8]}"
    durable = (await app.stores()).durable(kind)
    worker = Worker(grace_seconds=1.0)
    worker.workflow(kind, engine_one, durable)
    finished = Finished()
    logging.getLogger(LOGGER_NAME).addHandler(finished)
    serving = asyncio.create_task(app.serve(workflows=[single.kind], signals=False))
    working = asyncio.create_task(worker.run(install_signal_handlers=False))
    try:
        await asyncio.sleep(0.5)  # serving, listening
        ours, engine = [], []
        for n in range(RUNS):
            started = time.perf_counter()
            handle = await single.start()
            await handle.result(timeout=30)
            ours.append(time.perf_counter() - started)
            finished.expect(f"{kind}-{n}")
            started = time.perf_counter()
            await start_workflow(durable, finished.workflow)
            await asyncio.wait_for(finished.done.wait(), timeout=30)
            engine.append(time.perf_counter() - started)
        return sorted(ours), sorted(engine)
    finally:
        logging.getLogger(LOGGER_NAME).removeHandler(finished)
        worker.stop()
        serving.cancel()
        await asyncio.gather(serving, working, return_exceptions=True)


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
            method = getattr(checkpointer, name, None)
            if method is None:
                continue  # an optional read this checkpointer lacks

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


async def rates(app: App, completions: Completions) -> tuple[float, float, float]:
    """Median workflows per second over ``ROUNDS`` rounds: handles awaited beside
    ``serve``, ``serve`` alone, the `Worker`; and the ratios of the first two to the last
    (per round, then their median), as ``(awaited, serve alone)`` over the Worker."""

    @app.step(name="five-alone-step")
    async def step(n: int) -> dict[str, int]:
        return {"n": n}

    @app.workflow(name="five-alone")
    async def five(ctx: Context, n: int) -> int:
        for m in range(FIVE):
            await step(m)
        return FIVE

    drains = {
        "awaited": lambda: awaited_rate(app),
        "alone": lambda: app_workflows(app, five.kind, completions),
        "worker": lambda: engine_workflows(app, completions),
    }
    taken: dict[str, list[float]] = {name: [] for name in drains}
    names = list(drains)
    for round in range(ROUNDS):
        for name in names[round % 3 :] + names[: round % 3]:
            taken[name].append(await drains[name]())

    def over_worker(name: str) -> float:
        return statistics.median(
            ours / worker for ours, worker in zip(taken[name], taken["worker"], strict=True)
        )

    return statistics.median(taken["worker"]), over_worker("awaited"), over_worker("alone")


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
            times, engine = await latencies(app)
            p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99) - 1]
            ceiling = engine[len(engine) // 2]
            print(
                f"{backing + ': start-to-result of a one-step workflow':52} "
                f"p50 {p50 * 1e3:7.2f} ms ({p50 / trip:5.1f}x a round trip of "
                f"{trip * 1e3:.2f} ms; target {LATENCY_TARGET:.0f}x), p99 {p99 * 1e3:7.2f} ms "
                f"({p99 / trip:5.1f}x); ceiling: the Worker's start-to-finish p50 "
                f"{ceiling * 1e3:.2f} ms ({ceiling / trip:5.1f}x)",
                flush=True,
            )
            worker, awaited, alone = await rates(app, completions)
            print(
                f"{backing + f': {WORKFLOWS} five-step, handles awaited (wf/s)':52} "
                f"ratio to the Worker ({worker:7.1f}) {awaited:5.2f}x "
                f"(target {AWAITED_TARGET:.2f}x); ceiling: serve alone {alone:5.2f}x",
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
