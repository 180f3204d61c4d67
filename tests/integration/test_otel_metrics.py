"""Every metric durably names moves as work goes, read through OpenTelemetry's in-memory
reader; and ``durably worker --metrics-port`` serves them to Prometheus over 127.0.0.1.

The scenario runs in a process of its own (the API keeps the first meter provider a
process sets): ``python test_otel_metrics.py`` prints what it read at each stage as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from durably import App, Context, ManualClock, Topic, WorkItem
from durably.engine import Worker
from durably.memory import MemoryWorkQueue
from durably.stores.opening import Stores
from durably.stores.work import QueuePolicy

ROOT = Path(__file__).resolve().parents[2]
APPROVAL = Topic("approval", str)

NAMED = [
    "durably.items.claimed",
    "durably.items.completed",
    "durably.items.failed",
    "durably.items.retried",
    "durably.items.dead_lettered",
    "durably.leases.lost",
    "durably.workflow.passes",
    "durably.step.duration",
    "durably.queue.depth",
    "durably.queue.oldest_due_age",
    "durably.queue.claimed",
    "durably.queue.dead_lettered",
    "durably.items.running",
    "durably.workflow.running",
    "durably.workflows",
]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}


def test_every_metric_moves_as_items_fail_retry_die_lose_leases_and_workflows_run() -> None:
    done = subprocess.run(
        [sys.executable, __file__],
        capture_output=True,
        text=True,
        timeout=100,
        env=_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    stages: list[dict[str, dict[str, float]]] = json.loads(done.stdout.splitlines()[-1])
    for name in NAMED:
        seen = {json.dumps(stage.get(name), sort_keys=True) for stage in stages}
        assert len(seen) > 1, f"{name} never changed: {seen}"
    first, last = stages[0], stages[-1]
    assert last["durably.items.completed"] == {
        "queue=jobs,tenant=acme": 3.0,
        "queue=jobs,tenant=other": 1.0,  # past the bound of one tenant name
    }
    assert last["durably.items.dead_lettered"] == {"queue=jobs,tenant=acme": 1.0}
    assert last["durably.items.retried"] == {"queue=jobs,tenant=acme": 2.0}
    assert last["durably.items.failed"] == {"queue=jobs,tenant=acme": 3.0}
    assert last["durably.leases.lost"] == {"queue=jobs,tenant=acme": 1.0}
    assert last["durably.queue.dead_lettered"] == {"queue=jobs": 1.0}
    assert first["durably.queue.depth"] == {"queue=jobs": 3.0}
    assert first["durably.queue.oldest_due_age"] == {"queue=jobs": 5.0}
    passes = last["durably.workflow.passes"]
    assert passes["kind=approve,outcome=blocked,tenant=acme"] == 1.0
    assert passes["kind=approve,outcome=completed,tenant=acme"] == 1.0
    steps = last["durably.step.duration"]
    assert steps["kind=approve,outcome=ok,step=draft,tenant=acme"] == 1.0  # one performed
    assert last["durably.items.claimed"]["queue=jobs,tenant=other"] == 1.0
    assert "queue=jobs,tenant=zeta" not in last["durably.items.claimed"]
    statuses = [
        {k: v for k, v in stage.get("durably.workflows", {}).items() if v} for stage in stages
    ]
    assert {"status=running": 1.0} in statuses
    assert {"status=blocked": 1.0} in statuses
    assert statuses[-1] == {"status=completed": 1.0}


async def test_the_prometheus_endpoint_is_scraped_over_loopback(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = _serve_with_metrics(log)
    try:
        url = await _until(lambda: _endpoint(log), "the endpoint to be logged")
        assert url.startswith("http://127.0.0.1:")
        page = await _until(lambda: _scrape(url, "durably_items_completed_total{"), "a scrape")
        assert re.search(r'durably_items_completed_total\{[^}]*queue="mail"[^}]*\} 1\.0', page)
        assert re.search(r'durably_queue_depth\{[^}]*queue="mail"[^}]*\} 0\.0', page)
        assert 'tenant="acme"' in page
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, log.read_text()


def _serve_with_metrics(log: Path) -> subprocess.Popen[bytes]:
    """``durably worker`` serving `setup` with its metrics on a port the OS picks."""
    command = [sys.executable, "-m", "durably", "worker"]
    command += ["tests.integration.test_otel_metrics:setup", "--dsn", "memory://"]
    command += ["--metrics-port", "0", "--maintenance-seconds", "0.2"]
    with log.open("wb") as sink:
        return subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT
        )


async def _until(read: Any, what: str, timeout: float = 60.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await asyncio.to_thread(read)
        if found:
            return found
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def _endpoint(log: Path) -> str | None:
    found = re.search(r"metrics for Prometheus at (http://\S+)", log.read_text())
    return found.group(1) if found else None


def _scrape(url: str, needle: str) -> str | None:
    with urllib.request.urlopen(url, timeout=5) as answer:
        page = str(answer.read().decode())
    # Counted once the item completed: its counter line carries a value of 1.
    return page if needle in page and "durably_queue_depth{" in page else None


async def setup(worker: Worker, stores: Stores) -> None:
    """What ``durably worker`` serves in the endpoint test: one item, handled at once."""

    async def handler(item: WorkItem) -> None:
        return None

    worker.handle(stores.queue, handler, name="mail")
    await stores.queue.enqueue(WorkItem(id="welcome", tenant="acme", queue="mail"))


# --- the scenario, run in its own process -------------------------------------------------


def _read(reader: Any) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = found.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    label = ",".join(f"{k}={v}" for k, v in sorted(point.attributes.items()))
                    value = getattr(point, "value", None)
                    points[label] = float(point.count if value is None else value)
    return found


async def _scenario() -> list[dict[str, dict[str, float]]]:
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from durably.otel import tenant_labels

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    tenant_labels.reset(limit=1)  # "acme" keeps its name; any later tenant is "other"
    stages: list[dict[str, dict[str, float]]] = []
    clock = ManualClock()
    queue = MemoryWorkQueue(clock, QueuePolicy(lease_seconds=0.3, max_attempts=2))
    worker = Worker(clock=clock, poll_seconds=0.05, maintenance_seconds=3600)
    running = asyncio.Event()
    release = asyncio.Event()
    tries: dict[str, int] = {}

    async def handler(item: WorkItem) -> None:
        tries[item.id] = tries.get(item.id, 0) + 1
        if item.id == "doomed" or (item.id == "flaky" and tries[item.id] == 1):
            raise RuntimeError(f"{item.id} failed")
        if item.id == "slow" and tries[item.id] == 1:
            running.set()
            await release.wait()
            clock.advance(10)  # past its lease: a reap hands it back, the heartbeat loses it
            await queue.reap()
            await asyncio.sleep(30)  # cancelled when the heartbeat finds the lease lost

    worker.handle(queue, handler, name="jobs", concurrency=4)
    for name in ("ok", "flaky", "doomed"):
        await queue.enqueue(WorkItem(id=name, tenant="acme", queue="jobs"))
    clock.advance(5)
    await worker.maintain()
    stages.append(_read(reader))  # S0: three due items, waiting 5 s

    serving = asyncio.create_task(worker.run(install_signal_handlers=False))
    await _eventually(lambda: tries.get("doomed") == 1 and tries.get("flaky") == 1)
    await queue.enqueue(WorkItem(id="slow", tenant="acme", queue="jobs"))
    await queue.enqueue(WorkItem(id="stranger", tenant="zeta", queue="jobs"))
    await asyncio.wait_for(running.wait(), 30)
    await worker.maintain()
    stages.append(_read(reader))  # S1: one item running and claimed
    release.set()
    await _eventually(lambda: tries.get("doomed") == 2)
    await _eventually(lambda: "slow" not in worker_holds(worker))
    clock.advance(5)  # the reaped item's backoff is over
    await _eventually(lambda: tries.get("slow") == 2)
    await _eventually(lambda: tries.get("flaky") == 2)
    await asyncio.sleep(0.2)  # the last settles land
    await worker.maintain()
    stages.append(_read(reader))  # S2: retried, dead-lettered, a lease lost

    app = App("memory://")
    gate = asyncio.Event()
    drafting = asyncio.Event()

    @app.step(name="draft")
    async def draft() -> str:
        drafting.set()
        await gate.wait()
        return "draft"

    @app.workflow(name="approve")
    async def approve(ctx: Context) -> str:
        text = await draft()
        answer = await ctx.recv(APPROVAL)
        return f"{text}:{answer}"

    async with app:
        handle = await approve.start(tenant="acme")
        app_serving = asyncio.create_task(app.serve(maintenance=0.05, signals=False))
        await asyncio.wait_for(drafting.wait(), 30)
        await asyncio.sleep(0.3)  # a maintenance round samples the running pass
        stages.append(_read(reader))  # S3: a pass running
        gate.set()
        await _eventually_async(lambda: _status(handle, "blocked"))
        await asyncio.sleep(0.3)
        stages.append(_read(reader))  # S4: blocked waiting for the approval
        await handle.send(APPROVAL, "yes")
        assert await handle.result(timeout=30) == "draft:yes"
        await asyncio.sleep(0.3)
        stages.append(_read(reader))  # S5: completed
        app_serving.cancel()
        await asyncio.gather(app_serving, return_exceptions=True)
    worker.stop()
    await serving
    return stages


def worker_holds(worker: Worker) -> set[str]:
    """The items whose handlers still run in ``worker``."""
    return {key[1] for service in worker._queues for key in service._attempts}


async def _status(handle: Any, status: str) -> bool:
    info = await handle.status()
    return bool(info.status.value == status)


async def _eventually(condition: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def _eventually_async(condition: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await condition():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_scenario())))
