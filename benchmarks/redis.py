"""Redis backing against a floor of our own over the same server, as ratios.

The floor is the least a Redis queue can do: a Lua enqueue into a sorted set, a Lua claim
moving a member into a lease sorted set, ZREM to complete. durably does the same with
tenant rotation, leases, fencing and item records in force.

The machine is shared, so one run of a figure says little. Each figure is measured in
pairs, the floor and durably back to back (alternating which goes first, so a drift in
load hits both), after one discarded warm-up pair; the ratio printed is the median of the
per-pair ratios, beside the median figures and the spread of the ratios.

Uses ``DURABLY_BENCH_REDIS_DSN`` if set, else starts a redis-server (AOF, fsync every
second) on a free loopback port and stops it afterwards.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from durably.clock import SystemClock
from durably.redis import RedisCheckpointer, RedisWorkQueue
from durably.work import WorkItem

ITEMS = 2000
CONCURRENCY = 10
PROCESSES = 4
LATENCY_SAMPLES = 31
RUNS = 5
WARMUP = 1
FLOOR_CLAIM = (Path(__file__).parent / "redis_floor.lua").read_text()
FLOOR_ENQUEUE = "redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) return 1"

Measure = Callable[[str], Coroutine[Any, Any, float]]


@contextmanager
def server() -> Iterator[str]:
    """A Redis URL: the configured one, or a throwaway server with the AOF on."""
    configured = os.environ.get("DURABLY_BENCH_REDIS_DSN")
    if configured:
        yield configured
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server not found and DURABLY_BENCH_REDIS_DSN not set")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    directory = tempfile.mkdtemp(prefix="durably-bench-redis-")
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            directory,
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        url = f"redis://127.0.0.1:{port}/0"
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.02)
        yield url
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(directory, ignore_errors=True)


def fresh() -> str:
    return f"bench{uuid.uuid4().hex[:8]}"


# --- the floor ------------------------------------------------------------------------------


class Floor:
    """The minimal queue: one ready zset, one lease zset."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.ready, self.leases = f"{{{name}}}:ready", f"{{{name}}}:leases"
        self.enqueue_script = client.register_script(FLOOR_ENQUEUE)
        self.claim_script = client.register_script(FLOOR_CLAIM)

    async def enqueue(self, member: str) -> None:
        await self.enqueue_script(keys=[self.ready], args=[time.time(), member])

    async def claim(self) -> str | None:
        now = time.time()
        found = await self.claim_script(keys=[self.ready, self.leases], args=[now, now + 30])
        return None if found is None else str(found)

    async def complete(self, member: str) -> None:
        await self.client.zrem(self.leases, member)


# --- measurements ---------------------------------------------------------------------------


async def floor_enqueue(url: str) -> float:
    client = Redis.from_url(url)
    floor = Floor(client, fresh())
    started = time.perf_counter()
    for n in range(ITEMS):
        await floor.enqueue(f"item-{n}")
    elapsed = time.perf_counter() - started
    await client.aclose()
    return ITEMS / elapsed


async def durably_enqueue(url: str) -> float:
    client = Redis.from_url(url)
    queue = RedisWorkQueue(client, clock=SystemClock(), namespace=fresh())
    started = time.perf_counter()
    for n in range(ITEMS):
        await queue.enqueue(WorkItem(id=f"item-{n}", tenant=f"tenant-{n % 10}"))
    elapsed = time.perf_counter() - started
    await client.aclose()
    return ITEMS / elapsed


async def drain(url: str, kind: str, name: str, loops: int) -> int:
    """Claim and complete until the queue is empty, with ``loops`` concurrent loops."""
    client = Redis.from_url(url)
    done = 0
    if kind == "floor":
        floor = Floor(client, name)

        async def loop(worker: str) -> None:
            nonlocal done
            while (member := await floor.claim()) is not None:
                await floor.complete(member)
                done += 1

    else:
        queue = RedisWorkQueue(client, clock=SystemClock(), namespace=name)

        async def loop(worker: str) -> None:
            nonlocal done
            while (item := await queue.claim(worker=worker)) is not None:
                await queue.complete(item.id, tenant=item.tenant, worker=worker)
                done += 1

    await asyncio.gather(*(loop(f"{os.getpid()}-{n}") for n in range(loops)))
    await client.aclose()
    return done


async def fill(url: str, kind: str, name: str) -> None:
    client = Redis.from_url(url)
    if kind == "floor":
        floor = Floor(client, name)
        for start in range(0, ITEMS, 100):
            await asyncio.gather(*(floor.enqueue(f"item-{n}") for n in range(start, start + 100)))
    else:
        queue = RedisWorkQueue(client, clock=SystemClock(), namespace=name)
        items = [WorkItem(id=f"item-{n}", tenant=f"tenant-{n % 10}") for n in range(ITEMS)]
        for start in range(0, ITEMS, 100):
            await asyncio.gather(*(queue.enqueue(item) for item in items[start : start + 100]))
    await client.aclose()


def make_throughput(kind: str) -> Measure:
    async def measure(url: str) -> float:
        name = fresh()
        await fill(url, kind, name)
        started = time.perf_counter()
        done = await drain(url, kind, name, CONCURRENCY)
        assert done == ITEMS, (kind, done)
        return ITEMS / (time.perf_counter() - started)

    return measure


def _process(url: str, kind: str, name: str, barrier: Any, results: Any) -> None:
    barrier.wait()
    results.put(asyncio.run(drain(url, kind, name, CONCURRENCY)))


def make_processes(kind: str) -> Measure:
    async def measure(url: str) -> float:
        name = fresh()
        await fill(url, kind, name)
        context = multiprocessing.get_context("spawn")
        barrier, results = context.Barrier(PROCESSES + 1), context.Queue()
        workers = [
            context.Process(target=_process, args=(url, kind, name, barrier, results))
            for _ in range(PROCESSES)
        ]
        for worker in workers:
            worker.start()
        await asyncio.to_thread(barrier.wait)  # every process is up: start the clock
        started = time.perf_counter()
        done = 0
        for _ in workers:
            done += int(await asyncio.to_thread(results.get))
        elapsed = time.perf_counter() - started
        for worker in workers:
            worker.join()
        assert done == ITEMS, (kind, done)
        return ITEMS / elapsed

    return measure


def make_latency(kind: str) -> Measure:
    """p50 seconds from enqueue to claim for an idle worker (floor: a 1 ms poll)."""

    async def measure(url: str) -> float:
        client, name = Redis.from_url(url), fresh()
        floor = Floor(client, name)
        queue = RedisWorkQueue(client, clock=SystemClock(), namespace=name)
        samples: list[float] = []
        for n in range(LATENCY_SAMPLES):
            claimed: asyncio.Future[float] = asyncio.get_running_loop().create_future()

            async def worker(claimed: asyncio.Future[float] = claimed) -> None:
                while True:
                    if kind == "floor":
                        if await floor.claim() is not None:
                            claimed.set_result(time.perf_counter())
                            return
                        await asyncio.sleep(0.001)
                    else:
                        if await queue.claim(worker="w") is not None:
                            claimed.set_result(time.perf_counter())
                            return
                        await queue.wait_for_work(within=10.0)

            task = asyncio.create_task(worker())
            await asyncio.sleep(0.02)  # let it go idle
            sent = time.perf_counter()
            if kind == "floor":
                await floor.enqueue(f"item-{n}")
            else:
                await queue.enqueue(WorkItem(id=f"item-{n}", tenant="t"))
            samples.append(await claimed - sent)
            await task
        await client.aclose()
        return statistics.median(samples)

    return measure


async def durably_records(url: str) -> float:
    client = Redis.from_url(url)
    checkpointer = RedisCheckpointer(client, namespace=fresh())
    holder = await checkpointer.claim("workflow", 600.0, 600.0)
    assert holder is not None
    started = time.perf_counter()
    for n in range(ITEMS):
        await checkpointer.record(holder, f"step-{n}", {"n": n, "tokens": 128})
    elapsed = time.perf_counter() - started
    await client.aclose()
    return ITEMS / elapsed


def paired(floor: Measure, ours: Measure, url: str) -> tuple[list[float], list[float]]:
    """``RUNS`` figures of each, measured in back-to-back pairs after ``WARMUP`` pairs."""
    floors: list[float] = []
    oursides: list[float] = []
    for n in range(WARMUP + RUNS):
        if n % 2:
            our_value, floor_value = asyncio.run(ours(url)), asyncio.run(floor(url))
        else:
            floor_value, our_value = asyncio.run(floor(url)), asyncio.run(ours(url))
        if n >= WARMUP:
            floors.append(floor_value)
            oursides.append(our_value)
    return floors, oursides


def main() -> None:
    """Print the Redis table: floor, durably, ratio (medians of paired runs)."""
    with server() as url:
        rows: list[tuple[str, Measure, Measure, bool]] = [
            ("enqueue/s", floor_enqueue, durably_enqueue, True),
            (
                "claimed+completed/s, 1 process x10",
                make_throughput("floor"),
                make_throughput("durably"),
                True,
            ),
            (
                f"claimed+completed/s, {PROCESSES} processes x10",
                make_processes("floor"),
                make_processes("durably"),
                True,
            ),
            (
                "idle enqueue-to-start p50 (ms)",
                make_latency("floor"),
                make_latency("durably"),
                False,
            ),
            ("workflow record/s (vs floor enqueue)", floor_enqueue, durably_records, True),
        ]
        print(f"median of {RUNS} pairs after {WARMUP} warm-up pair(s)")
        print(f"{'figure':44} {'floor':>10} {'durably':>10} {'ratio':>7}  ratio range")
        for label, floor, ours, higher_is_better in rows:
            floors, oursides = paired(floor, ours, url)
            ratios = sorted(o / f for f, o in zip(floors, oursides, strict=True))
            scale = 1.0 if higher_is_better else 1000.0
            print(
                f"{label:44} {statistics.median(floors) * scale:10.1f} "
                f"{statistics.median(oursides) * scale:10.1f} "
                f"{statistics.median(ratios):6.2f}x  {ratios[0]:.2f}-{ratios[-1]:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
