"""Redis backing against a floor of our own over the same server, as ratios.

The floor is the least a Redis queue can do: a Lua enqueue into a sorted set, a Lua claim
moving a member into a lease sorted set, ZREM to complete. durably does the same with
tenant rotation, leases, fencing and item records in force. For idle latency the floor's
enqueue also rings a doorbell list its idle worker blocks on, as durably's does (the
PostgreSQL floor's worker waits on LISTEN likewise); a floor polling every millisecond is
printed beside it for reference.

The machine is shared, so one run of a figure says little. Each figure is measured as
pairs (floor, durably) after one discarded warm-up pair; the ratio printed is the median
of the per-pair ratios, beside the median figures and the spread of the ratios. Within a
pair the two sides share the load as closely as the figure allows: sequential loops
(enqueue, record) alternate in chunks of 100 operations, latency samples alternate one by
one, and the throughput runs go back to back, alternating which goes first.

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
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr
from redis.asyncio import Redis

from durably.clock import SystemClock
from durably.engine.worker import Worker
from durably.redis import RedisCheckpointer, RedisStoreSettings, RedisWorkQueue
from durably.stores.work import WorkItem
from redis import Redis as SyncRedis

ITEMS = 2000
CONCURRENCY = 10
PROCESSES = 4
LATENCY_SAMPLES = 31
RUNS = 5
WARMUP = 1
FLOOR_CLAIM = (Path(__file__).parent / "redis_floor.lua").read_text()
FLOOR_ENQUEUE = "redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) return 1"
# The record floor's enqueue: the item's record (a hash of its fields) beside its ready
# entry, the least a queue that can answer for an item by id writes.
FLOOR_RECORD_ENQUEUE = (
    "redis.call('HSET', KEYS[1], 'payload', ARGV[3], 'tenant', ARGV[4], 'id', ARGV[2], "
    "'queue', 'default', 'state', 'queued', 'enqueued_at', ARGV[1]) "
    "redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2]) return 1"
)
# The doorbell floor's enqueue: the floor's, plus one ring for a blocked worker.
FLOOR_RINGING_ENQUEUE = (
    "redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) redis.call('LPUSH', KEYS[2], 1) return 1"
)

Measure = Callable[[str], Coroutine[Any, Any, float]]
Pair = Callable[[str, bool], Coroutine[Any, Any, tuple[float, float]]]


@contextmanager
def server() -> Iterator[str]:
    """A Redis URL: the configured one, or a throwaway server with the AOF on."""
    configured = os.environ.get("DURABLY_BENCH_REDIS_DSN")
    if configured:
        yield configured
        return
    with _started("--appendonly", "yes", "--appendfsync", "everysec") as url:
        yield url


@contextmanager
def replica(primary: str) -> Iterator[str]:
    """A throwaway replica of ``primary`` (in sync before it is yielded): its URL."""
    parts = urlsplit(primary)
    with _started("--replicaof", parts.hostname or "127.0.0.1", str(parts.port or 6379)) as url:
        client = SyncRedis.from_url(primary)
        for _ in range(1500):
            if "online" in str(client.info("replication").get("slave0", "")):
                break
            time.sleep(0.02)
        client.close()
        yield url


@contextmanager
def _started(*options: str) -> Iterator[str]:
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
            "--save",
            "",
            "--repl-diskless-sync-delay",
            "0",
            *options,
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
    """The minimal queue: one ready zset, one lease zset (and, for the doorbell floor, a
    list its enqueue rings and its idle worker blocks on)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.ready, self.leases = f"{{{name}}}:ready", f"{{{name}}}:leases"
        self.bell = f"{{{name}}}:bell"
        self.enqueue_script = client.register_script(FLOOR_ENQUEUE)
        self.ringing_script = client.register_script(FLOOR_RINGING_ENQUEUE)
        self.claim_script = client.register_script(FLOOR_CLAIM)
        self.record_script = client.register_script(FLOOR_RECORD_ENQUEUE)
        self.name = name

    async def enqueue(self, member: str) -> None:
        await self.enqueue_script(keys=[self.ready], args=[time.time(), member])

    async def enqueue_recorded(self, member: str, tenant: str) -> None:
        """The floor's enqueue that also writes the item's record."""
        await self.record_script(
            keys=[f"{{{self.name}}}:item:{tenant}:{member}", self.ready],
            args=[time.time(), member, "{}", tenant],
        )

    async def enqueue_ringing(self, member: str) -> None:
        await self.ringing_script(keys=[self.ready, self.bell], args=[time.time(), member])

    async def claim(self) -> str | None:
        now = time.time()
        found = await self.claim_script(keys=[self.ready, self.leases], args=[now, now + 30])
        return None if found is None else str(found)

    async def complete(self, member: str) -> None:
        await self.client.zrem(self.leases, member)


# --- measurements ---------------------------------------------------------------------------


Step = Callable[[int], Coroutine[Any, Any, Any]]
CHUNK = 100


async def interleaved(floor_step: Step, our_step: Step) -> tuple[float, float]:
    """Ops/s of each side, run in alternating chunks so both see the same load."""
    spent = [0.0, 0.0]
    for start in range(0, ITEMS, CHUNK):
        sides = [(0, floor_step), (1, our_step)]
        for side, step in sides if (start // CHUNK) % 2 == 0 else sides[::-1]:
            began = time.perf_counter()
            for n in range(start, start + CHUNK):
                await step(n)
            spent[side] += time.perf_counter() - began
    return ITEMS / spent[0], ITEMS / spent[1]


async def enqueues(url: str, floor_first: bool) -> tuple[float, float]:
    client = Redis.from_url(url)
    floor = Floor(client, fresh())
    queue = RedisWorkQueue(client, clock=SystemClock(), key_prefix=fresh())

    async def ours(n: int) -> None:
        await queue.enqueue(WorkItem(id=f"item-{n}", tenant=f"tenant-{n % 10}"))

    result = await interleaved(lambda n: floor.enqueue(f"item-{n}"), ours)
    await client.aclose()
    return result


async def recorded_enqueues(url: str, floor_first: bool) -> tuple[float, float]:
    """durably's enqueue against the floor that writes the item's record beside its ready
    entry (durably's enqueue target: 0.85x of this floor)."""
    client = Redis.from_url(url)
    floor = Floor(client, fresh())
    queue = RedisWorkQueue(client, clock=SystemClock(), namespace=fresh())

    async def ours(n: int) -> None:
        await queue.enqueue(WorkItem(id=f"item-{n}", tenant=f"tenant-{n % 10}"))

    result = await interleaved(
        lambda n: floor.enqueue_recorded(f"item-{n}", f"tenant-{n % 10}"), ours
    )
    await client.aclose()
    return result


async def replicated_enqueues(url: str, plain_first: bool) -> tuple[float, float]:
    """durably's enqueue without and with waiting for one replica (``replicas=1``)."""
    client = Redis.from_url(url)
    plain = RedisWorkQueue(client, clock=SystemClock(), key_prefix=fresh())
    settings = RedisStoreSettings(dsn=SecretStr(url), key_prefix=fresh(), replicas=1)
    waiting = RedisWorkQueue(client, clock=SystemClock(), settings=settings)

    async def enqueue(queue: RedisWorkQueue, n: int) -> None:
        await queue.enqueue(WorkItem(id=f"item-{n}", tenant=f"tenant-{n % 10}"))

    result = await interleaved(partial(enqueue, plain), partial(enqueue, waiting))
    await client.aclose()
    return result


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
        queue = RedisWorkQueue(client, clock=SystemClock(), key_prefix=name)

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
        queue = RedisWorkQueue(client, clock=SystemClock(), key_prefix=name)
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


async def worker_throughput(url: str) -> float:
    """A real `Worker` at concurrency ``CONCURRENCY`` with an empty handler draining
    ``ITEMS``: items/s to the last handler's start."""
    name = fresh()
    await fill(url, "durably", name)
    client = Redis.from_url(url)
    queue = RedisWorkQueue(client, clock=SystemClock(), namespace=name)
    started, drained = 0, asyncio.Event()

    async def handler(item: WorkItem) -> None:
        nonlocal started
        started += 1
        if started == ITEMS:
            drained.set()

    worker = Worker(name=f"bench-{name}", grace_seconds=1.0)
    worker.handle(queue, handler, concurrency=CONCURRENCY)
    began = time.perf_counter()
    serving = asyncio.create_task(worker.run(install_signal_handlers=False))
    await asyncio.wait_for(drained.wait(), 300)
    elapsed = time.perf_counter() - began
    worker.stop()
    await serving
    await client.aclose()
    return ITEMS / elapsed


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


def _enqueuer(url: str, floor_name: str, queue_name: str, commands: Any) -> None:
    """A client process of its own: on each command, read the clock and enqueue."""
    loop = asyncio.new_event_loop()
    client = Redis.from_url(url)
    floor = Floor(client, floor_name)
    queue = RedisWorkQueue(client, clock=SystemClock(), key_prefix=queue_name)
    while (command := commands.recv()) is not None:
        kind, n = command
        sent = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        if kind == "floor":
            loop.run_until_complete(floor.enqueue(f"item-{n}"))
        elif kind == "floor-bell":
            loop.run_until_complete(floor.enqueue_ringing(f"item-{n}"))
        else:
            loop.run_until_complete(queue.enqueue(WorkItem(id=f"item-{n}", tenant="t")))
        commands.send(sent)
    loop.run_until_complete(client.aclose())
    loop.close()


def make_latencies(separate: bool, doorbell: bool = False) -> Pair:
    """p50 seconds from enqueue to start for an idle worker, the two sides' samples taken
    alternately. durably's is a real `Worker` (default poll, the product's idle path),
    timed to its handler's start; both sides idle 20 ms before each sample.

    With ``doorbell`` (the target rows), the floor's worker blocks as durably's does and as
    the PostgreSQL floor's waits on LISTEN: ``BLPOP`` on a list its enqueue rings, then the
    floor's claim (two round trips; durably pipelines the wait and the claim into one).
    Without, it polls its claim every millisecond, a worker that never sleeps, kept as a
    reference.

    With ``separate``, the enqueues come from a process of their own, as from an
    application; otherwise from the workers' own event loop, where the polling floor also
    keeps the enqueuer awake (a 20 ms-idle round trip costs about 0.3 ms more here) and
    often sends its claim right behind the enqueue."""

    async def measure(url: str, floor_first: bool) -> tuple[float, float]:
        client, floor_name, queue_name = Redis.from_url(url), fresh(), fresh()
        floor = Floor(client, floor_name)
        queue = RedisWorkQueue(client, clock=SystemClock(), key_prefix=queue_name)
        samples: dict[str, list[float]] = {"floor": [], "durably": []}
        started: list[asyncio.Future[float]] = []
        floor_claimed: list[asyncio.Future[float]] = []

        async def handler(item: WorkItem) -> None:
            started[-1].set_result(time.perf_counter())

        worker = Worker(name=f"bench-{queue_name}", grace_seconds=1.0)
        worker.handle(queue, handler)
        serving = asyncio.create_task(worker.run(install_signal_handlers=False))

        async def poller(claimed: asyncio.Future[float]) -> None:
            while await floor.claim() is None:
                await asyncio.sleep(0.001)
            claimed.set_result(time.perf_counter())

        async def blocking_floor() -> None:
            """The doorbell floor's worker: block on the bell, then claim."""
            while True:
                if await client.blpop([floor.bell], timeout=1) is None:
                    continue
                if await floor.claim() is not None and floor_claimed:
                    floor_claimed[-1].set_result(time.perf_counter())

        floor_kind = "floor-bell" if doorbell else "floor"
        child: Any = None
        if separate:
            context = multiprocessing.get_context("spawn")
            ours, theirs = context.Pipe()
            child = context.Process(target=_enqueuer, args=(url, floor_name, queue_name, theirs))
            child.start()

        async def enqueue(kind: str, n: int) -> Callable[[], float]:
            """Enqueue; the instant it was sent, to read once the item has started (the
            other process's answer is read only then, so no read competes with the
            worker)."""
            if child is not None:
                ours.send((kind, n))
                return lambda: float(ours.recv())
            sent = time.perf_counter()
            if kind == "floor":
                await floor.enqueue(f"item-{n}")
            elif kind == "floor-bell":
                await floor.enqueue_ringing(f"item-{n}")
            else:
                await queue.enqueue(WorkItem(id=f"item-{n}", tenant="t"))
            return lambda: sent

        (await enqueue("floor", -1))()  # the other process is up and connected
        while await floor.claim() is None:
            await asyncio.sleep(0.01)
        blocking = asyncio.create_task(blocking_floor()) if doorbell else None
        for n in range(LATENCY_SAMPLES):
            for kind in ("floor", "durably") if n % 2 == 0 else ("durably", "floor"):
                claimed: asyncio.Future[float] = asyncio.get_running_loop().create_future()
                task = None
                if kind == "durably":
                    started.append(claimed)
                elif doorbell:
                    floor_claimed.append(claimed)
                else:
                    task = asyncio.create_task(poller(claimed))
                await asyncio.sleep(0.02)  # let it go idle
                sent = await enqueue(kind if kind == "durably" else floor_kind, n)
                began = await claimed
                samples[kind].append(began - sent())
                if task is not None:
                    await task
        if blocking is not None:
            blocking.cancel()
            await asyncio.gather(blocking, return_exceptions=True)
        if child is not None:
            ours.send(None)
            await asyncio.to_thread(child.join)
        worker.stop()
        await serving
        await client.aclose()
        return statistics.median(samples["floor"]), statistics.median(samples["durably"])

    return measure


async def records(url: str, floor_first: bool) -> tuple[float, float]:
    """Workflow records against the floor's enqueue, in alternating chunks."""
    client = Redis.from_url(url)
    floor = Floor(client, fresh())
    checkpointer = RedisCheckpointer(client, key_prefix=fresh())
    # The Worker's defaults (budget 3600 s, alive 30 s): every record renews the window.
    holder = await checkpointer.claim("workflow", 3600.0, 30.0)
    assert holder is not None

    async def ours(n: int) -> None:
        await checkpointer.record(holder, f"step-{n}", {"n": n, "tokens": 128})

    result = await interleaved(lambda n: floor.enqueue(f"item-{n}"), ours)
    await client.aclose()
    return result


def both(floor: Measure, ours: Measure) -> Pair:
    """A pair of separate measurements, back to back, in the order asked."""

    async def measure(url: str, floor_first: bool) -> tuple[float, float]:
        if floor_first:
            floor_value = await floor(url)
            return floor_value, await ours(url)
        our_value = await ours(url)
        return await floor(url), our_value

    return measure


def paired(measure: Pair, url: str) -> tuple[list[float], list[float]]:
    """``RUNS`` pairs (floor, durably), alternating which goes first, after ``WARMUP``."""
    floors: list[float] = []
    oursides: list[float] = []
    for n in range(WARMUP + RUNS):
        floor_value, our_value = asyncio.run(measure(url, n % 2 == 0))
        if n >= WARMUP:
            floors.append(floor_value)
            oursides.append(our_value)
    return floors, oursides


def main() -> None:
    """Print the Redis table: floor, durably, ratio (medians of paired runs)."""
    with server() as url:
        rows: list[tuple[str, Pair, bool]] = [
            ("enqueue/s", enqueues, True),
            ("enqueue/s (vs a floor writing the record)", recorded_enqueues, True),
            (
                "claimed+completed/s, 1 process x10",
                both(make_throughput("floor"), make_throughput("durably")),
                True,
            ),
            # The "floor" column here is durably's own loop of claim + complete (the row
            # above): the Worker's target is 0.9x of it.
            (
                "  same, through a Worker (vs durably's loop)",
                both(make_throughput("durably"), worker_throughput),
                True,
            ),
            (
                f"claimed+completed/s, {PROCESSES} processes x10",
                both(make_processes("floor"), make_processes("durably")),
                True,
            ),
            # The target row: the floor's idle worker blocks as durably's does (and as the
            # PostgreSQL floor's waits on LISTEN), in the workers' own loop.
            ("idle enqueue-to-start p50 (ms)", make_latencies(False, True), False),
            ("  same, enqueued from another process (ms)", make_latencies(True, True), False),
            ("  vs a floor polling every 1 ms (ms)", make_latencies(False), False),
            ("  polling floor, from another process (ms)", make_latencies(True), False),
            ("workflow record/s (vs floor enqueue)", records, True),
        ]
        print(f"median of {RUNS} pairs after {WARMUP} warm-up pair(s)")
        print(f"{'figure':44} {'floor':>10} {'durably':>10} {'ratio':>7}  ratio range")
        for label, measure, higher_is_better in rows:
            _row(label, measure, higher_is_better, url)
        if not os.environ.get("DURABLY_BENCH_REDIS_DSN"):
            # A replica of our own, started only now: the rows above run without one. The
            # "floor" column is durably's enqueue without waiting.
            with replica(url):
                _row("enqueue/s, WAIT 1 replica (vs without)", replicated_enqueues, True, url)


def _row(label: str, measure: Pair, higher_is_better: bool, url: str) -> None:
    floors, oursides = paired(measure, url)
    ratios = sorted(o / f for f, o in zip(floors, oursides, strict=True))
    scale = 1.0 if higher_is_better else 1000.0
    print(
        f"{label:44} {statistics.median(floors) * scale:10.1f} "
        f"{statistics.median(oursides) * scale:10.1f} "
        f"{statistics.median(ratios):6.3f}x  {ratios[0]:.2f}-{ratios[-1]:.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
