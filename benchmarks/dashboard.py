"""Dashboard pages: the answer time of each page over a store holding many queue items,
workflows and agent runs (target 100,000 items, 10,000 workflows and 20 tenants of 1,000
runs per backing, or as many as fit in ``FILL_SECONDS`` each: the row says which). Each
page is asked ``READS`` times through the ASGI application in this process (no network);
the row is the median and the worst.

    python -m benchmarks dashboard
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from durably.app import App, Context
from durably.dashboard import dashboard
from durably.stores.runs import RunRecord, Usage
from durably.stores.work import WorkItem

ITEMS = 100_000
WORKFLOWS = 10_000
RUN_TENANTS = 20
RUNS = 1000  # per tenant
FILL_SECONDS = float(os.environ.get("DURABLY_BENCH_FILL_SECONDS", "30"))
BATCH = 50
READS = 15
QUEUE = "bench"


async def _fill_runs(app: App) -> int:
    """Store `RUNS` agent runs in each of `RUN_TENANTS` tenants, for up to `FILL_SECONDS`."""
    state = (await app.stores()).state
    started = time.perf_counter()
    runs = 0
    while runs < RUNS and time.perf_counter() - started < FILL_SECONDS:
        upto = min(runs + BATCH // 5, RUNS)
        used = Usage(input_tokens=120, output_tokens=40)
        await asyncio.gather(
            *(
                state.put_run(
                    RunRecord(run_id=f"r{n}", tenant=f"t{t}", agent_name="bench", usage=used)
                )
                for t in range(RUN_TENANTS)
                for n in range(runs, upto)
            )
        )
        runs = upto
    return runs * RUN_TENANTS


async def _fill(app: App) -> tuple[int, int, float]:
    """Enqueue items, then start workflows, each for up to `FILL_SECONDS`."""
    stores = await app.stores()
    started = time.perf_counter()
    items = 0
    while items < ITEMS and time.perf_counter() - started < FILL_SECONDS:
        batch = [
            WorkItem(id=f"i{n}", tenant=f"t{n % 50}", queue=QUEUE, payload={"n": str(n)})
            for n in range(items, min(items + BATCH, ITEMS))
        ]
        await asyncio.gather(*(stores.queue.enqueue(item) for item in batch))
        items += len(batch)
    for n in range(20):  # a page of dead letters
        claimed = await stores.queue.claim(worker="bench", queue=QUEUE)
        assert claimed is not None
        await stores.queue.fail(
            claimed.id, tenant=claimed.tenant, worker="bench", error=f"e{n}", retryable=False
        )
    kind = app.workflows["bench-wait"]
    middle = time.perf_counter()
    workflows = 0
    while workflows < WORKFLOWS and time.perf_counter() - middle < FILL_SECONDS:
        upto = min(workflows + BATCH, WORKFLOWS)
        await asyncio.gather(
            *(kind.start(n, id=f"w{n}", tenant=f"t{n % 50}") for n in range(workflows, upto))
        )
        workflows = upto
    return items, workflows, time.perf_counter() - started


async def _backing(name: str, dsn: str) -> None:
    import httpx

    app = App(dsn)

    @app.workflow(name="bench-wait")
    async def wait(ctx: Context, n: int) -> int:
        return n

    try:
        items, workflows, seconds = await _fill(app)
        runs = await _fill_runs(app)
        site = dashboard(app, queues=(QUEUE,))
        pages = {
            "overview": "/",
            "queue": f"/queue?name={QUEUE}",
            "workflows": "/workflows",
            "workflows by tenant": "/workflows?tenant=t7",
            "workflows by status": "/workflows?status=pending",
            "workflow": "/workflow?id=w5&tenant=t5",
            "runs": "/runs",
        }
        transport = httpx.ASGITransport(app=site)
        print(
            f"{name}: {items:,} items and {workflows:,} workflows filled in {seconds:.0f} s,"
            f" {runs:,} runs"
        )
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            for page, path in pages.items():
                times: list[float] = []
                for _ in range(READS):
                    began = time.perf_counter()
                    answer: Any = await http.get(path)
                    times.append((time.perf_counter() - began) * 1000)
                    assert answer.status_code == 200, (path, answer.status_code)
                print(
                    f"  {page:22} median {statistics.median(times):7.1f} ms"
                    f"   worst {max(times):7.1f} ms"
                )
    finally:
        await app.close()


def main() -> None:
    """Print the rows of every backing reachable."""
    from benchmarks.operating import _postgres_dsn

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_backing("sqlite", f"sqlite:///{Path(directory) / 'dash.db'}"))
    try:
        dsn, drop = _postgres_dsn()
    except Exception as exc:  # the server is optional here
        print(f"postgresql: skipped ({type(exc).__name__})")
    else:
        try:
            asyncio.run(_backing("postgresql", dsn))
        finally:
            drop()
    from benchmarks.redis import server

    with server() as url:
        asyncio.run(_backing("redis", url))


if __name__ == "__main__":
    main()
