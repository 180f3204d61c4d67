"""The application layer against the engine beneath it, on every backing, as ratios.

Two figures, each measured both ways in the same round (order swapped every round) and
reported as the median of the per-round ratios over ``ROUNDS`` rounds:

- a step through ``@app.step`` against ``run.step`` with the same key: ``STEPS`` steps in
  one pass, timed around the pass (the App's side also checks the argument digest, encodes
  through pydantic and writes its result record), ``STEP_PAIRS`` pairs a round, each pair
  in the other order from the last (a pass is a tenth of a second on SQLite, where one
  pair a round left the median at the mercy of a few noisy passes);
- five-step workflows per second through ``app.serve()`` against the same workflows
  through today's ``Worker`` (concurrency 10 each), timed from the worker's start to the
  last workflow reported completed, ``FIVE_PAIRS`` pairs a round in alternating order;
- beside it, the ceiling that figure has: ``app.serve()`` against the same ``Worker`` and
  engine body serving workflows the App started, so that each status write moves what the
  App keeps per workflow (catalog entry and counts, tenant admission, run record and its
  totals). The engine's workflows carry none of it; the gap between the two ``Worker``
  figures is the store's cost of what the App promises (listing, counts, limits, run
  state), the gap left between this one and ``serve`` is the App's own code.

Run with ``python -m benchmarks.app [--cpu] [memory sqlite postgres redis]``. With
``--cpu`` the step figure is this process's CPU time instead of wall time: on a loaded,
shared machine that still shows the App's own cost (its Python per step) steadily, though
not a store server's share.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from durably import App, Context
from durably.app import _layout as layout
from durably.engine.runtime import Execution, resume
from durably.engine.worker import LOGGER_NAME, Worker, start_workflow
from durably.stores.workflows import Completed, Finish

ROUNDS = 7
STEPS = 300
STEP_PAIRS = 4
WORKFLOWS = 500  # a longer drain than 200: less of the figure is start-up and wake-up timing
FIVE_PAIRS = 3
"""Drains of each side a round, each pair in the other order from the last: on a shared
machine one pair a round left the median to a few rounds' drift (single runs of the Redis
figure read 0.72 to 1.01 within one half hour)."""
FIVE = 5
BACKINGS = ("memory", "sqlite", "postgres", "redis")
STEP_CLOCK = time.perf_counter
"""What times the step figure (`time.process_time` with ``--cpu``)."""
PG_ADMIN = os.environ.get("DURABLY_BENCH_POSTGRES_DSN", "postgresql://root@127.0.0.1:5432/postgres")


class Completions(logging.Handler):
    """Counts the worker's "workflow completed" reports; set when ``target`` is reached."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        self.target = 0
        self.done = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("workflow %r completed"):
            self.count += 1
            if self.count >= self.target:
                self.done.set()

    def expect(self, total: int) -> None:
        self.count, self.target, self.done = 0, total, asyncio.Event()


async def engine_steps(app: App) -> float:
    """Seconds for one pass of ``STEPS`` ``run.step`` calls."""
    checkpointer = (await app.stores()).checkpointer
    workflow = f"engine-{uuid.uuid4().hex}"

    async def body(run: Execution) -> None:
        for n in range(STEPS):
            await run.step(
                layout.occurrence("pay", n + 1), functools.partial(dict, n=n, tokens=128)
            )

    holder = await checkpointer.claim(workflow, 3600.0, 30.0)
    assert holder is not None
    started = STEP_CLOCK()
    await resume(holder, checkpointer, body)
    elapsed = STEP_CLOCK() - started
    await checkpointer.release(holder)
    return elapsed


async def app_steps(app: App, kind: str) -> float:
    """Seconds for one pass of ``STEPS`` ``@app.step`` calls (same keys, same values)."""
    stores = await app.stores()
    workflow = app.workflows[kind]
    workflow_id = f"app-{uuid.uuid4().hex}"
    await stores.checkpointer.supply(
        workflow_id, layout.START, workflow.prepare((), {}, tenant=None, timeout=None)
    )
    holder = await stores.checkpointer.claim(workflow_id, 3600.0, 30.0)
    assert holder is not None
    started = STEP_CLOCK()
    outcome = await resume(holder, stores.checkpointer, workflow.body)
    if isinstance(outcome, Completed) and isinstance(outcome.value, Finish):
        # The result record a Worker writes with the status: written here as before.
        await stores.checkpointer.record(holder, outcome.value.key, outcome.value.value)
    elapsed = STEP_CLOCK() - started
    await stores.checkpointer.release(holder)
    return elapsed


async def engine_five(run: Execution) -> int:
    """The five-step workflow as an engine body (``run.step`` with plain keys)."""
    for n in range(FIVE):
        await run.step(f"step-{n}", functools.partial(dict, n=n))
    return FIVE


async def engine_workflows(app: App, completions: Completions) -> float:
    """Five-step workflows per second through a `Worker` serving `engine_five`."""
    kind = f"engine-{uuid.uuid4().hex[:8]}"
    durable = (await app.stores()).durable(kind)
    for n in range(WORKFLOWS):
        await start_workflow(durable, f"{kind}-{n}", n)
    worker = Worker(grace_seconds=1.0)
    worker.workflow(kind, engine_five, durable)
    return await _drain(completions, worker.run(install_signal_handlers=False), worker.stop)


async def kept_workflows(app: App, kind: str, completions: Completions) -> float:
    """Five-step workflows/s through a `Worker` serving `engine_five` over workflows started
    by ``app`` (its kind ``kind``): each status write then moves what the App keeps for a
    workflow (catalog entry and counts, tenant admission, run record and totals), so this
    is the store's share of ``app.serve()``'s work, driven by the engine's own code."""
    workflow = app.workflows[kind]
    for n in range(WORKFLOWS):
        await workflow.start(n, id=f"{kind}-kept-{uuid.uuid4().hex[:8]}-{n}")
    worker = Worker(grace_seconds=1.0)
    worker.workflow(kind, engine_five, (await app.stores()).durable(kind))
    return await _drain(completions, worker.run(install_signal_handlers=False), worker.stop)


async def app_workflows(app: App, kind: str, completions: Completions) -> float:
    """Five-step workflows per second through ``app.serve()``."""
    workflow = app.workflows[kind]
    for n in range(WORKFLOWS):
        await workflow.start(n, id=f"{kind}-{uuid.uuid4().hex[:8]}-{n}")
    serving = app.serve(workflows=[kind], grace=1.0)
    return await _drain(completions, serving, None)


async def _drain(
    completions: Completions, serving: Awaitable[None], stop: Callable[[], None] | None
) -> float:
    completions.expect(WORKFLOWS)
    started = time.perf_counter()
    task = asyncio.ensure_future(serving)
    try:
        await asyncio.wait_for(completions.done.wait(), timeout=600)
        return WORKFLOWS / (time.perf_counter() - started)
    finally:
        if stop is not None:
            stop()
        else:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def register(app: App, round: int) -> tuple[str, str]:
    """The App's step-cost workflow and five-step workflow for one round."""

    @app.step(name=f"pay-{round}")
    async def pay(n: int) -> dict[str, int]:
        return {"n": n, "tokens": 128}

    @app.workflow(name=f"steps-{round}")
    async def many(ctx: Context) -> None:
        for n in range(STEPS):
            await pay(n)

    @app.step(name=f"five-{round}")
    async def step(n: int) -> dict[str, int]:
        return {"n": n}

    @app.workflow(name=f"five-{round}")
    async def five(ctx: Context, n: int) -> int:
        for m in range(FIVE):
            await step(m)
        return FIVE

    return many.kind, five.kind


async def measure(dsn: str) -> dict[str, list[tuple[float, float]]]:
    """Per figure, ``(engine, app)`` per round."""
    completions = Completions()
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(logging.INFO)
    logger.addHandler(completions)
    logger.propagate = False
    figures: dict[str, list[tuple[float, float]]] = {"step": [], "five": [], "kept": []}
    try:
        for round in range(ROUNDS + 1):  # round 0 warms up
            app = App(dsn)
            try:
                many, five = register(app, round)
                # The step figure keys the App's steps "pay-R#N"; the engine's "pay#N".
                steps: list[tuple[float, float]] = []
                for pair in range(STEP_PAIRS):
                    if (round + pair) % 2 == 0:
                        first = await engine_steps(app)
                        steps.append((first, await app_steps(app, many)))
                    else:
                        first = await app_steps(app, many)
                        steps.append((await engine_steps(app), first))
                drains: list[tuple[float, float]] = []
                kept: list[tuple[float, float]] = []
                for pair in range(FIVE_PAIRS):
                    rates: dict[str, float] = {}
                    sides = (
                        ("engine", "app", "kept")
                        if (round + pair) % 2 == 0
                        else ("app", "kept", "engine")
                    )
                    for side in sides:
                        if side == "engine":
                            rates[side] = await engine_workflows(app, completions)
                        elif side == "app":
                            rates[side] = await app_workflows(app, five, completions)
                        else:
                            rates[side] = await kept_workflows(app, five, completions)
                    drains.append((rates["engine"], rates["app"]))
                    kept.append((rates["kept"], rates["app"]))
            finally:
                await app.close()
            if round:
                figures["step"].extend(steps)
                figures["five"].extend(drains)
                figures["kept"].extend(kept)
    finally:
        logger.removeHandler(completions)
        logger.propagate = True
    return figures


@contextlib.asynccontextmanager
async def dsn_for(backing: str) -> AsyncIterator[str | None]:
    """A DSN naming an empty store of ``backing`` (None when it is unreachable)."""
    if backing == "memory":
        yield "memory://"
    elif backing == "sqlite":
        with tempfile.TemporaryDirectory(prefix="durably-bench-") as directory:
            yield f"sqlite:///{Path(directory) / 'bench.db'}"
    elif backing == "postgres":
        from urllib.parse import urlsplit, urlunsplit

        import psycopg

        name = f"durably_bench_app_{uuid.uuid4().hex[:8]}"
        try:
            admin = await psycopg.AsyncConnection.connect(PG_ADMIN, autocommit=True)
        except psycopg.OperationalError:
            yield None
            return
        async with admin:
            await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield urlunsplit(urlsplit(PG_ADMIN)._replace(path=f"/{name}"))
        finally:
            async with await psycopg.AsyncConnection.connect(PG_ADMIN, autocommit=True) as admin:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        from benchmarks.redis import server

        with server() as url:
            yield url


async def run(backings: list[str]) -> None:
    print(f"{'figure':52} {'engine':>10} {'App':>10} {'ratio':>7}  range")
    for backing in backings:
        async with dsn_for(backing) as dsn:
            if dsn is None:
                print(f"{backing}: unreachable; skipped")
                continue
            figures = await measure(dsn)
        rows: list[tuple[str, list[tuple[float, float]], bool]] = [
            (f"{backing}: {STEPS} steps in one pass (ms)", figures["step"], False),
            (f"{backing}: five-step workflows/s (serve vs Worker)", figures["five"], True),
            (f"{backing}:   ceiling: Worker over App-started workflows", figures["kept"], True),
        ]
        for label, pairs, higher_is_better in rows:
            ratios = sorted(ours / engine for engine, ours in pairs)
            scale = 1.0 if higher_is_better else 1000.0
            print(
                f"{label:52} {statistics.median(e for e, _ in pairs) * scale:10.1f} "
                f"{statistics.median(o for _, o in pairs) * scale:10.1f} "
                f"{statistics.median(ratios):6.3f}x  {ratios[0]:.2f}-{ratios[-1]:.2f}",
                flush=True,
            )
    print(
        f"(medians over {ROUNDS} rounds after a warm-up, {STEP_PAIRS} step pairs and "
        f"{FIVE_PAIRS} workflow pairs a round; "
        "ratio App / engine: for the step time lower is better, for workflows/s higher is "
        "better)"
    )


def main(argv: list[str] | None = None) -> None:
    """Print the App-versus-engine table for the backings named (all by default)."""
    global STEP_CLOCK
    names = list(argv or [])
    if "--cpu" in names:
        names.remove("--cpu")
        STEP_CLOCK = time.process_time
    chosen = names if names else list(BACKINGS)
    asyncio.run(run(chosen))


if __name__ == "__main__":
    main(sys.argv[1:])
