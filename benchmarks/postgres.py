"""PostgreSQL figures against a floor of our own over the same server, as ratios.

The floor is a minimal queue of our own (single-row ``INSERT``; batched ``UPDATE ... WHERE id
IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT k)`` to claim; ``DELETE`` to complete), through
the same pool and executor, with ``fsync`` and ``synchronous_commit`` as the server has them.

The machine is shared, so one measurement of a figure says little. After one discarded
warm-up round, each of ``ROUNDS`` rounds measures the floor and durably together and the
table prints the median of the per-round ratios and their range. Within a round the two
sides share the load as closely as the figure allows: one-at-a-time loops (enqueue, record,
transact) alternate in slices of ``SLICE`` operations, latency samples alternate one by one
(each side idle ``IDLE_SECONDS`` before its sample, as an idle worker is), and the drains
run back to back, the order swapped every round. Every round's schema is new, so both
sides first run their statements untimed on each pooled connection until PostgreSQL has
settled their plans, as in a service that has been up for a while.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks import drains
from benchmarks.drains import CountingCompletions
from durably.clock import SystemClock
from durably.errors import WorkItemNotFoundError
from durably.postgres import PostgresCheckpointer, PostgresWorkQueue, StateTables, migrate
from durably.postgres.executor import database_for
from durably.stores.work import QueuePolicy, WorkItem

ADMIN_DSN = os.environ.get(
    "DURABLY_BENCH_POSTGRES_DSN", "postgresql://root@127.0.0.1:5432/postgres"
)
WARMUP = 1
ROUNDS = 5
ONE_AT_A_TIME = 400  # enqueues, records, transacts per side and round
SLICE = 25
DRAIN = 1500
CONCURRENCY = 10
BATCH = 10
PROCESSES = 4
LATENCY_SAMPLES = 25  # per side and round
IDLE_SECONDS = 0.02  # how long the waiting side sits idle before each latency sample
ENQUEUE_QUEUE = "bench-enqueue"  # kept apart from the drained queue
# PostgreSQL plans a prepared statement afresh for its first five runs on a connection,
# then settles on a generic plan; durably's claim takes about 0.6 ms to plan. A running
# service pays that once per connection, but every round's schema is new, so before each
# measurement both sides run their statements this many times a pooled connection
# (untimed; before a drain, touching nothing).
PLANNED = 8
WARM_OPS = PLANNED * (CONCURRENCY + 2)  # a one-at-a-time side: the pool hands out in turn
WARM_QUEUE = "bench-warm"  # never holds an item

Step = Callable[[int], Awaitable[object]]


def _floor_statements(schema: str) -> dict[str, str]:
    text = (Path(__file__).parent / "postgres_floor.sql").read_text()
    found: dict[str, str] = {}
    for part in text.split("-- name: ")[1:]:
        name, _, body = part.partition("\n")
        found[name.strip()] = body.strip().rstrip(";").replace("{schema}", schema)
    return found


def _dsn(database: str) -> str:
    return urlunsplit(urlsplit(ADMIN_DSN)._replace(path=f"/{database}"))


async def _pool(dsn: str, size: int = CONCURRENCY + 2) -> Any:
    from psycopg_pool import AsyncConnectionPool

    pool: Any = AsyncConnectionPool(
        dsn,
        min_size=size,
        max_size=size,
        kwargs={"options": "-c statement_timeout=30000"},
        open=False,
    )
    await pool.open(wait=True)
    return pool


async def _fetch(pool: Any, statement: str, *args: Any) -> Any:
    async with database_for(pool).session(10.0) as session:
        return await session.fetch(statement, *args)


def _queue(pool: Any, tables: StateTables) -> PostgresWorkQueue:
    return PostgresWorkQueue(
        pool, clock=SystemClock(), policy=QueuePolicy(lease_seconds=60), tables=tables
    )


async def interleaved(count: int, floor_step: Step, our_step: Step) -> tuple[float, float]:
    """Ops/s of each side, in alternating slices (order swapped every slice), after an
    untimed warm-up of ``WARM_OPS`` a side: every round runs on a freshly created schema,
    and each of the pool's connections prepares each statement, loads the new tables'
    catalog entries and plans its first few runs afresh, a cost a running service pays
    once."""
    for n in range(-WARM_OPS, 0):
        await floor_step(n)
        await our_step(n)
    spent = [0.0, 0.0]
    for start in range(0, count, SLICE):
        sides = [(0, floor_step), (1, our_step)]
        for side, step in sides if (start // SLICE) % 2 == 0 else sides[::-1]:
            began = time.perf_counter()
            for n in range(start, min(count, start + SLICE)):
                await step(n)
            spent[side] += time.perf_counter() - began
    return count / spent[0], count / spent[1]


# --- drains ---------------------------------------------------------------------------


async def floor_fill(pool: Any, sql: dict[str, str], total: int) -> None:
    for start in range(0, total, 100):
        await asyncio.gather(
            *(_fetch(pool, sql["enqueue"], "{}") for _ in range(min(100, total - start)))
        )


async def durably_fill(queue: PostgresWorkQueue, total: int) -> None:
    for start in range(0, total, 100):
        await asyncio.gather(
            *(
                queue.enqueue(WorkItem(id=uuid.uuid4().hex, tenant=f"t{n % 4}"))
                for n in range(min(100, total - start))
            )
        )


async def floor_warm(pool: Any, sql: dict[str, str]) -> None:
    """The floor's claim (``LIMIT 0``) and complete (no such id) on every connection."""

    async def loop() -> None:
        for _ in range(PLANNED):
            await _fetch(pool, sql["claim"], 0)
            await _fetch(pool, sql["complete"], -1)

    await asyncio.gather(*(loop() for _ in range(CONCURRENCY + 2)))


async def durably_warm(queue: PostgresWorkQueue) -> None:
    """durably's claim and complete on every connection, on a queue that stays empty."""

    async def loop() -> None:
        for _ in range(PLANNED):
            await queue.claim_many(worker="warm", queue=WARM_QUEUE, limit=BATCH)
            with contextlib.suppress(WorkItemNotFoundError):
                await queue.complete("warm", tenant="warm", worker="warm")

    await asyncio.gather(*(loop() for _ in range(CONCURRENCY + 2)))


async def floor_drain(pool: Any, sql: dict[str, str]) -> int:
    done = 0

    async def loop() -> None:
        nonlocal done
        while rows := await _fetch(pool, sql["claim"], BATCH):
            for (job,) in rows:
                await _fetch(pool, sql["complete"], job)
                done += 1

    await asyncio.gather(*(loop() for _ in range(CONCURRENCY)))
    return done


async def durably_drain(queue: PostgresWorkQueue) -> int:
    done = 0

    async def loop(name: str) -> None:
        nonlocal done
        while batch := await queue.claim_many(worker=name, limit=BATCH):
            for item in batch:
                await queue.complete(item.id, tenant=item.tenant, worker=name)
                done += 1

    await asyncio.gather(*(loop(f"w{os.getpid()}-{n}") for n in range(CONCURRENCY)))
    return done


class _CountingQueue(CountingCompletions, PostgresWorkQueue):
    """Counts completions, so a Worker's drain is timed to its last settle."""


async def worker_drain(pool: Any, tables: StateTables, total: int) -> float:
    """A real `Worker` at concurrency 10 with an empty handler: items/s to the last settle."""
    queue = _CountingQueue(
        pool, clock=SystemClock(), policy=QueuePolicy(lease_seconds=60), tables=tables
    )
    try:
        return await drains.worker_drain(
            queue, total, CONCURRENCY, name=f"bench-{uuid.uuid4().hex[:6]}"
        )
    finally:
        await queue.close()


def _child(dsn: str, commands: Any, barrier: Any) -> None:
    """A drain process of its own, kept for every round: on each command, set up, wait at the
    barrier with the others, drain, report how many it took."""

    async def run() -> None:
        pool = await _pool(dsn)
        try:
            while (command := await asyncio.to_thread(commands.recv)) is not None:
                kind, schema = command
                sql = _floor_statements(schema)
                queue = _queue(pool, StateTables(schema=schema))
                await (floor_warm(pool, sql) if kind == "floor" else durably_warm(queue))
                await asyncio.to_thread(barrier.wait)
                if kind == "floor":
                    done = await floor_drain(pool, sql)
                else:
                    done = await durably_drain(queue)
                commands.send(done)
        finally:
            await pool.close()

    asyncio.run(run())


class Processes:
    """``PROCESSES`` drain processes started once, so a round pays no start-up."""

    def __init__(self, dsn: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.barrier = context.Barrier(PROCESSES + 1)
        self.pipes: list[Any] = []
        self.children: list[Any] = []
        for _ in range(PROCESSES):
            ours, theirs = context.Pipe()
            child = context.Process(target=_child, args=(dsn, theirs, self.barrier))
            child.start()
            self.pipes.append(ours)
            self.children.append(child)

    async def rate(self, kind: str, schema: str, total: int) -> float:
        for pipe in self.pipes:
            pipe.send((kind, schema))
        await asyncio.to_thread(self.barrier.wait, 60)  # every process is set up
        started = time.perf_counter()
        done = sum(await asyncio.gather(*(asyncio.to_thread(p.recv) for p in self.pipes)))
        elapsed = time.perf_counter() - started
        assert done == total, (kind, done, total)
        return total / elapsed

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for child in self.children:
            child.join(30)


# --- latency ----------------------------------------------------------------------------


async def latencies(
    dsn: str, pool: Any, sql: dict[str, str], schema: str, queue: PostgresWorkQueue
) -> tuple[list[float], list[float]]:
    """Enqueue-to-claimed seconds, floor and durably samples alternating. The floor's
    listener and durably's worker each sit idle ``IDLE_SECONDS`` before every sample."""
    import psycopg

    floor_samples: list[float] = []
    our_samples: list[float] = []
    await queue.wait_for_work(within=0)
    await queue.listener.ready()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as listener:
        await listener.execute(f'LISTEN "floor_{schema}"')

        async def floor_sample() -> None:
            await asyncio.sleep(IDLE_SECONDS)
            started = time.perf_counter()
            await _fetch(pool, sql["enqueue_notify"], "{}")
            async for _note in listener.notifies(timeout=5.0, stop_after=1):
                pass
            rows = await _fetch(pool, sql["claim"], 1)
            floor_samples.append(time.perf_counter() - started)
            await _fetch(pool, sql["complete"], rows[0][0])

        async def our_sample() -> None:
            ready = asyncio.Event()
            taken: list[float] = []

            async def idle_worker() -> None:
                ready.set()
                while True:
                    item = await queue.claim(worker="idle")
                    if item is not None:
                        taken.append(time.perf_counter())
                        await queue.complete(item.id, tenant=item.tenant, worker="idle")
                        return
                    await queue.wait_for_work(within=5.0)

            task = asyncio.create_task(idle_worker())
            await ready.wait()
            await asyncio.sleep(IDLE_SECONDS)  # let the worker go idle on its wait
            started = time.perf_counter()
            await queue.enqueue(WorkItem(id=uuid.uuid4().hex, tenant="t"))
            await task
            our_samples.append(taken[0] - started)

        for n in range(LATENCY_SAMPLES):
            for sample in (floor_sample, our_sample) if n % 2 == 0 else (our_sample, floor_sample):
                await sample()
    return floor_samples, our_samples


# --- one round --------------------------------------------------------------------------

Pairs = dict[str, tuple[float, float]]


async def one_round(
    dsn: str, pool: Any, processes: Processes, number: int, samples: dict[str, list[float]]
) -> Pairs:
    schema = f"b_{uuid.uuid4().hex[:10]}"
    tables = StateTables(schema=schema)
    await migrate(pool, tables)
    sql = _floor_statements(schema)
    await _fetch(pool, sql["create"])
    queue = _queue(pool, tables)
    floor_first = number % 2 == 0
    pairs: Pairs = {}

    async def floor_insert(n: int) -> None:
        await _fetch(pool, sql["enqueue"], f'{{"n": {n}}}')

    # Random ids, as a service's are, drawn before the timed loop: the benchmark times
    # durably's enqueue, not the caller's source of randomness (uuid4 reads the OS's).
    ids = [uuid.uuid4().hex for _ in range(WARM_OPS + ONE_AT_A_TIME)]

    async def our_enqueue(n: int) -> None:
        await queue.enqueue(
            WorkItem(id=ids[n + WARM_OPS], tenant="t", queue=ENQUEUE_QUEUE, payload={"n": str(n)})
        )

    pairs["enqueue/s"] = await interleaved(ONE_AT_A_TIME, floor_insert, our_enqueue)

    checkpointer = PostgresCheckpointer(pool, tables=tables)
    # The Worker's defaults (budget 3600 s, alive 30 s): every record renews the window.
    holder = await checkpointer.claim(uuid.uuid4().hex, 3600, 30)
    assert holder is not None

    async def record(n: int) -> None:
        await checkpointer.record(holder, f"s{n}", {"n": n})

    async def effect(cursor: Any) -> object:
        return 1

    async def transact(n: int) -> None:
        await checkpointer.transact(holder, f"t{n}", effect)

    pairs["record/s (vs floor insert)"] = await interleaved(ONE_AT_A_TIME, floor_insert, record)
    pairs["transact/s (vs floor insert)"] = await interleaved(ONE_AT_A_TIME, floor_insert, transact)
    await _fetch(pool, sql["clear"])

    async def floor_one() -> float:
        await floor_fill(pool, sql, DRAIN)
        await floor_warm(pool, sql)
        started = time.perf_counter()
        assert await floor_drain(pool, sql) == DRAIN
        return DRAIN / (time.perf_counter() - started)

    async def ours_one() -> float:
        await durably_fill(queue, DRAIN)
        await durably_warm(queue)
        started = time.perf_counter()
        assert await durably_drain(queue) == DRAIN
        return DRAIN / (time.perf_counter() - started)

    async def worker_one() -> float:
        await durably_fill(queue, DRAIN)
        await durably_warm(queue)
        return await worker_drain(pool, tables, DRAIN)

    async def floor_many() -> float:
        await floor_fill(pool, sql, DRAIN)
        return await processes.rate("floor", schema, DRAIN)

    async def ours_many() -> float:
        await durably_fill(queue, DRAIN)
        return await processes.rate("durably", schema, DRAIN)

    for label, floor_side, our_side in (
        ("claimed+completed/s, 1 proc x10", floor_one, ours_one),
        ("  same, through a Worker (1 proc x10)", floor_one, worker_one),
        (f"claimed+completed/s, {PROCESSES} procs x10", floor_many, ours_many),
    ):
        if floor_first:
            floor_value = await floor_side()
            pairs[label] = (floor_value, await our_side())
        else:
            our_value = await our_side()
            pairs[label] = (await floor_side(), our_value)

    floor_samples, our_samples = await latencies(dsn, pool, sql, schema, queue)
    pairs["idle enqueue-to-start p50 (ms)"] = (
        statistics.median(floor_samples),
        statistics.median(our_samples),
    )
    samples.setdefault("floor", []).extend(floor_samples)
    samples.setdefault("durably", []).extend(our_samples)
    await queue.close()
    await _fetch(pool, f"DROP SCHEMA {schema} CASCADE")
    return pairs


def _p99(samples: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]


async def measure(dsn: str) -> tuple[list[Pairs], dict[str, list[float]]]:
    rounds: list[Pairs] = []
    samples: dict[str, list[float]] = {}
    pool = await _pool(dsn)
    processes = Processes(dsn)
    try:
        for number in range(WARMUP + ROUNDS):
            kept: dict[str, list[float]] = {}
            pairs = await one_round(dsn, pool, processes, number, kept)
            if number >= WARMUP:
                rounds.append(pairs)
                for side, values in kept.items():
                    samples.setdefault(side, []).extend(values)
    finally:
        await asyncio.to_thread(processes.close)
        await pool.close()
    return rounds, samples


def main() -> None:
    """Create a scratch database, print the table, drop the database."""
    import psycopg

    name = f"durably_bench_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        print(f"PostgreSQL unreachable ({type(error).__name__}); skipped")
        return
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        rounds, samples = asyncio.run(measure(_dsn(name)))
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"median of {ROUNDS} rounds after {WARMUP} warm-up round(s)")
    print(f"{'figure':44} {'floor':>10} {'durably':>10} {'ratio':>7}  ratio range")
    for label in rounds[0]:
        floors = [pairs[label][0] for pairs in rounds]
        ours = [pairs[label][1] for pairs in rounds]
        ratios = sorted(o / f for f, o in zip(floors, ours, strict=True))
        scale = 1000.0 if label.endswith("(ms)") else 1.0
        print(
            f"{label:44} {statistics.median(floors) * scale:10.1f} "
            f"{statistics.median(ours) * scale:10.1f} "
            f"{statistics.median(ratios):6.3f}x  {ratios[0]:.2f}-{ratios[-1]:.2f}",
            flush=True,
        )
    floor_p99, our_p99 = _p99(samples["floor"]), _p99(samples["durably"])
    print(
        f"{'idle enqueue-to-start p99 (ms), pooled':44} {floor_p99 * 1000:10.1f} "
        f"{our_p99 * 1000:10.1f} {our_p99 / floor_p99:6.3f}x  "
        f"({len(samples['durably'])} samples a side)"
    )
    print(
        f"(ratios: durably / floor per round; for latency lower is better. Both sides sit "
        f"idle {IDLE_SECONDS * 1000:.0f} ms before each latency sample.)"
    )


if __name__ == "__main__":
    main()
