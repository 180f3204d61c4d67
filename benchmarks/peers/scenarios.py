"""The four scenarios of `make bench-peers` over every system, medians and ratios.

Scenarios: enqueue ``JOBS`` one at a time (the systems taking turns every
``CHUNK`` enqueues); drain ``JOBS`` no-op jobs with one
process at concurrency ``CONCURRENCY``; the same with ``PROCESSES`` processes; idle latency
from enqueue to the handler's start over ``SAMPLES`` jobs (p50 and p99), each enqueued
after the worker sat idle ``IDLE_SECONDS``. Every round runs on a fresh PostgreSQL database
and a fresh throwaway redis-server (AOF on, fsync every second, as `make bench` runs
Redis), and the systems take turns, so they share the machine's load as evenly as a
shared machine allows. Environment: ``DURABLY_BENCH_POSTGRES_DSN`` (the admin DSN, default
``postgresql://root@127.0.0.1:5432/postgres``), ``DURABLY_PEERS_ROUNDS``,
``DURABLY_PEERS_JOBS``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from multiprocessing.sharedctypes import Synchronized
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks.peers.systems import Arq, BareRedis, Durably, DurablyTasks, PgQueuer, Saq, System
from benchmarks.redis import server

ADMIN_DSN = os.environ.get(
    "DURABLY_BENCH_POSTGRES_DSN", "postgresql://root@127.0.0.1:5432/postgres"
)
ROUNDS = int(os.environ.get("DURABLY_PEERS_ROUNDS", "3"))
JOBS = int(os.environ.get("DURABLY_PEERS_JOBS", "5000"))
CONCURRENCY = 10
PROCESSES = 4
SAMPLES = 200
CHUNK = 1000
"""Enqueues a system makes in one turn of the enqueue scenario. Turns of 100 read durably's
Redis enqueue at about 1.5x SAQ's where turns of 1,000 read 1.4x, on the same machine
within minutes: short turns cost each library its warm caches and its background tasks'
catch-up, which falls unevenly. A thousand keeps that small while five turns a system
still share a drifting machine (the measurements are in dev/benchmarks/peers.md)."""
WARM = 200
"""Untimed enqueues each system makes before the enqueue scenario is timed."""
IDLE_SECONDS = 0.02
DRAIN_ONE = f"drain 1x{CONCURRENCY} /s"
DRAIN_MANY = f"drain {PROCESSES}x{CONCURRENCY} /s"
FIGURES = ("enqueue/s", DRAIN_ONE, DRAIN_MANY, "idle p50 ms", "idle p99 ms")
HIGHER_IS_BETTER = {"enqueue/s", DRAIN_ONE, DRAIN_MANY}
PEERS = {"postgres": ("PgQueuer",), "redis": ("SAQ", "arq")}
BARE = "bare (redis)"
"""The Redis enqueue scenario's ceiling (`BareRedis`): enqueue only."""

Recipe = tuple[str, str, str]  # (system, DSN or URL, queue name): rebuilt in each process


def build(recipe: Recipe) -> System:
    """The system a recipe names (in this process)."""
    kind, where, name = recipe
    backing = "postgres" if where.startswith("postgresql") else "redis"
    if kind == "durably":
        return Durably(where, backing, name)
    if kind == "tasks":
        return DurablyTasks(where, backing, name)
    if kind == "PgQueuer":
        return PgQueuer(where, name)
    if kind == "SAQ":
        return Saq(where, name)
    if kind == "bare":
        return BareRedis(where, name)
    return Arq(where, name)


async def enqueue_rates(recipes: list[tuple[str, Recipe]]) -> dict[str, float]:
    """Each system's enqueues per second, ``JOBS`` one at a time, the systems taking turns
    every ``CHUNK`` enqueues (the order reversed every turn) after ``WARM`` untimed ones
    each, so a change in the machine's load meets them all alike."""
    systems = [(label, build(recipe)) for label, recipe in recipes]
    for _, system in systems:
        await system.open()
    try:
        for _, system in systems:  # connections, scripts and first calls, untimed
            for _ in range(WARM):
                await system.enqueue(time.monotonic())
        spent = {label: 0.0 for label, _ in systems}
        for turn in range(JOBS // CHUNK):
            for label, system in systems if turn % 2 == 0 else systems[::-1]:
                started = time.perf_counter()
                for _ in range(CHUNK):
                    await system.enqueue(time.monotonic())
                spent[label] += time.perf_counter() - started
        return {label: CHUNK * (JOBS // CHUNK) / seconds for label, seconds in spent.items()}
    finally:
        for _, system in systems:
            await system.close()


async def drain_rate(recipe: Recipe) -> float:
    system = build(recipe)
    await system.open()
    try:
        await system.fill(JOBS)
        finished, stop = asyncio.Event(), asyncio.Event()
        count = 0

        def done(sent: float) -> None:
            nonlocal count
            count += 1
            if count == JOBS:
                finished.set()

        started = time.perf_counter()
        working = asyncio.ensure_future(system.work(CONCURRENCY, done, stop))
        await asyncio.wait(
            {asyncio.ensure_future(finished.wait()), working},
            return_when=asyncio.FIRST_COMPLETED,
        )
        elapsed = time.perf_counter() - started
        stop.set()
        await working
        assert count >= JOBS, f"{recipe[0]} finished {count} of {JOBS} jobs"
        return JOBS / elapsed
    finally:
        await system.close()


def _drain_process(recipe: Recipe, counter: Synchronized[int], ready: Any, stop: Any) -> None:
    async def main() -> None:
        system = build(recipe)
        await system.open()
        stopping = asyncio.Event()

        def done(sent: float) -> None:
            with counter.get_lock():
                counter.value += 1

        async def watch() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.01)
            stopping.set()

        ready.wait()
        watcher = asyncio.ensure_future(watch())
        try:
            await system.work(CONCURRENCY, done, stopping)
        finally:
            watcher.cancel()
            await system.close()

    asyncio.run(main())


async def drain_processes_rate(recipe: Recipe) -> float:
    system = build(recipe)
    await system.open()
    try:
        await system.fill(JOBS)
    finally:
        await system.close()
    context = multiprocessing.get_context("spawn")
    counter: Synchronized[int] = context.Value("i", 0)
    ready = context.Barrier(PROCESSES + 1)
    stop = context.Event()
    processes = [
        context.Process(target=_drain_process, args=(recipe, counter, ready, stop))
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    try:
        await asyncio.to_thread(ready.wait, 120)  # a process that died breaks the barrier
        started = time.perf_counter()
        while counter.value < JOBS:
            if not all(process.is_alive() for process in processes):
                raise RuntimeError(f"a {recipe[0]} worker process died")
            await asyncio.sleep(0.002)
        return JOBS / (time.perf_counter() - started)
    finally:
        stop.set()
        for process in processes:
            await asyncio.to_thread(process.join, 30)
            if process.is_alive():
                process.kill()


async def idle_latencies(recipe: Recipe) -> tuple[float, float]:
    system = build(recipe)
    await system.open()
    started: asyncio.Queue[float] = asyncio.Queue()
    stop = asyncio.Event()

    def done(sent: float) -> None:
        started.put_nowait(time.monotonic() - sent)

    working = asyncio.ensure_future(system.work(CONCURRENCY, done, stop))
    try:
        samples = []
        for n in range(SAMPLES + 5):  # the first five warm the worker up
            await asyncio.sleep(IDLE_SECONDS)
            await system.enqueue(time.monotonic())
            latency = await asyncio.wait_for(started.get(), timeout=60)
            if n >= 5:
                samples.append(latency)
        samples.sort()
        return samples[len(samples) // 2] * 1000, samples[int(len(samples) * 0.99)] * 1000
    finally:
        stop.set()
        await working
        await system.close()


def _database_dsn(name: str) -> str:
    return urlunsplit(urlsplit(ADMIN_DSN)._replace(path=f"/{name}"))


def _admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(statement)


Figures = dict[str, dict[str, float]]  # system -> figure -> value


def one_round(number: int) -> Figures:
    """Every scenario for every system on fresh servers; the systems take turns."""
    database = f"peers_{uuid.uuid4().hex[:10]}"
    _admin(f'CREATE DATABASE "{database}"')
    figures: Figures = {}
    try:
        with server() as redis_url:
            dsn = _database_dsn(database)
            recipes: list[tuple[str, Recipe]] = []
            for label, kind, where in (
                ("durably (postgres)", "durably", dsn),
                ("durably tasks (postgres)", "tasks", dsn),
                ("PgQueuer", "PgQueuer", dsn),
                ("durably (redis)", "durably", redis_url),
                ("durably tasks (redis)", "tasks", redis_url),
                ("SAQ", "SAQ", redis_url),
                ("arq", "arq", redis_url),
            ):
                recipes.append((label, (kind, where, "")))
            turn = recipes[number % len(recipes) :] + recipes[: number % len(recipes)]
            fresh = [
                (label, (kind, where, f"q{uuid.uuid4().hex[:8]}"))
                for label, (kind, where, _) in [*turn, (BARE, ("bare", redis_url, ""))]
            ]
            for label, value in asyncio.run(enqueue_rates(fresh)).items():
                figures.setdefault(label, {})["enqueue/s"] = value
                print(f"  round {number + 1}: {label:<26} {'enqueue/s':<16} {value:>10,.1f}")
            scenarios: list[tuple[str, Callable[[Recipe], Any]]] = [
                (DRAIN_ONE, drain_rate),
                (DRAIN_MANY, drain_processes_rate),
            ]
            for figure, scenario in scenarios:
                for label, (kind, where, _) in turn:
                    recipe = (kind, where, f"q{uuid.uuid4().hex[:8]}")
                    value = asyncio.run(scenario(recipe))
                    figures.setdefault(label, {})[figure] = value
                    print(f"  round {number + 1}: {label:<26} {figure:<16} {value:>10,.1f}")
            for label, (kind, where, _) in turn:
                recipe = (kind, where, f"q{uuid.uuid4().hex[:8]}")
                p50, p99 = asyncio.run(idle_latencies(recipe))
                figures[label]["idle p50 ms"], figures[label]["idle p99 ms"] = p50, p99
                print(f"  round {number + 1}: {label:<26} idle p50/p99 ms  {p50:.1f} / {p99:.1f}")
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    return figures


def report(rounds: list[Figures]) -> None:
    """Medians of the rounds, then each durably figure as a ratio to each peer."""
    systems = list(rounds[0])
    median = {
        s: {f: statistics.median(r[s][f] for r in rounds) for f in FIGURES if f in rounds[0][s]}
        for s in systems
    }
    print(f"\nmedians of {len(rounds)} round(s), {JOBS} jobs, concurrency {CONCURRENCY}")
    print(f"{'system':<26}" + "".join(f"{f:>18}" for f in FIGURES))
    for system in systems:
        cells = (f"{median[system][f]:,.1f}" if f in median[system] else "-" for f in FIGURES)
        print(f"{system:<26}" + "".join(f"{cell:>18}" for cell in cells))
    print("\ndurably ÷ peer, each round's ratio then their median (rates: higher is better; ")
    print("latencies: lower is better)")
    for backing, peers in PEERS.items():
        # The engine's Worker over the queue, and the task API an App user writes.
        pairs = [(f"durably{api} ({backing})", peer) for api in ("", " tasks") for peer in peers]
        for ours, peer in pairs:
            for figure in FIGURES:
                ratios = [r[ours][figure] / r[peer][figure] for r in rounds]
                better = "higher" if figure in HIGHER_IS_BETTER else "lower"
                shown = ", ".join(f"{x:.2f}" for x in ratios)
                print(
                    f"  {ours:<24} ÷ {peer:<9} {figure:<16} {statistics.median(ratios):>6.2f}"
                    f"   ({shown}; {better} is better)"
                )
    print("\nthe Redis enqueue's ceiling: durably's script from a bare socket (`BareRedis`)")
    for name, top, bottom in (
        ("bare ÷ SAQ (the most durably ÷ SAQ could read)", BARE, "SAQ"),
        ("durably (redis) ÷ bare", "durably (redis)", BARE),
    ):
        ratios = [r[top]["enqueue/s"] / r[bottom]["enqueue/s"] for r in rounds]
        shown = ", ".join(f"{x:.2f}" for x in ratios)
        print(f"  {name:<48} {statistics.median(ratios):>6.2f}   ({shown})")


def main() -> None:
    """Run ``ROUNDS`` rounds and print the tables."""
    print(f"bench-peers: {ROUNDS} round(s) of {JOBS} jobs (Python {sys.version.split()[0]})")
    rounds = [one_round(number) for number in range(ROUNDS)]
    report(rounds)
