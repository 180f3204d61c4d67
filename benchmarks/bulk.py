"""Bulk starts and cancels through the App: a batch against one call a workflow.

Per backing, alternating rounds in one process (the load of a shared machine falls on
both sides alike): 1,000 workflows started by `Workflow.start_many` against `start` 8
side by side, and a page of 1,000 pending workflows cancelled by `App.cancel_workflows`
(a page in a few store calls) against `WorkflowHandle.cancel` 8 side by side.

    python -m benchmarks bulk
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.operating import _postgres_dsn
from durably import App, Context, Topic

BATCH = 1_000
ROUNDS = int(os.environ.get("DURABLY_BENCH_ROUNDS", "4"))
IN_FLIGHT = 8
BACKINGS = os.environ.get("DURABLY_BENCH_BACKINGS", "sqlite,postgresql,redis").split(",")
GO = Topic("go", str)


async def _side_by_side(calls: list[Callable[[], Awaitable[Any]]]) -> None:
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            await call()

    await asyncio.gather(*(one(call) for call in calls))


async def _backing(name: str, dsn: str) -> None:
    app = App(dsn)

    @app.workflow(name="bench.bulk")
    async def waits(ctx: Context) -> str:
        return str(await ctx.recv(GO))

    times = {"start_many": 0.0, "start x8": 0.0, "cancel_workflows": 0.0, "cancel x8": 0.0}
    async with app:
        for round in range(ROUNDS):
            batched_first = round % 2 == 0
            for batched in (batched_first, not batched_first):
                tenant = f"bench-{uuid.uuid4().hex[:8]}"
                started = time.perf_counter()
                if batched:
                    handles = await waits.start_many([()] * BATCH, tenant=tenant)
                    times["start_many"] += time.perf_counter() - started
                else:
                    found: list[Any] = []

                    async def start(tenant: str = tenant, found: list[Any] = found) -> None:
                        found.append(await waits.start(tenant=tenant))

                    await _side_by_side([start] * BATCH)
                    handles = found
                    times["start x8"] += time.perf_counter() - started
                started = time.perf_counter()
                if batched:
                    result = await app.cancel_workflows(tenant=tenant, limit=BATCH)
                    assert len(result.changed) == BATCH
                    times["cancel_workflows"] += time.perf_counter() - started
                else:
                    await _side_by_side([handle.cancel for handle in handles])
                    times["cancel x8"] += time.perf_counter() - started
    per = {key: seconds / ROUNDS for key, seconds in times.items()}
    print(f"{name}: {BATCH:,} workflows a round, {ROUNDS} rounds (seconds a round)")
    for many, single in (("start_many", "start x8"), ("cancel_workflows", "cancel x8")):
        ratio = per[single] / per[many]
        print(f"  {many:18} {per[many]:6.2f}   {single:10} {per[single]:6.2f}  {ratio:5.1f}x")


def main() -> None:
    """Print the rows of every backing reachable (of ``DURABLY_BENCH_BACKINGS``)."""
    if "sqlite" in BACKINGS:
        with tempfile.TemporaryDirectory() as directory:
            asyncio.run(_backing("sqlite", f"sqlite:///{Path(directory) / 'bulk.db'}"))
    if "postgresql" in BACKINGS:
        try:
            dsn, drop = _postgres_dsn()
        except Exception as exc:  # the server is optional here
            print(f"postgresql: skipped ({type(exc).__name__})")
        else:
            try:
                asyncio.run(_backing("postgresql", dsn))
            finally:
                drop()
    if "redis" in BACKINGS:
        from benchmarks.redis import server

        with server() as url:
            base = url.rsplit("/", 1)[0] if url.count("/") > 2 else url
            asyncio.run(_backing("redis", f"{base}/3"))


if __name__ == "__main__":
    main()
