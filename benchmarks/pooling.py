"""Out of one machine: the App through PgBouncer (transaction pooling) against direct
PostgreSQL, and on a 3-master Redis Cluster against one Redis server.

Rows: the time to drain ``WORKFLOWS`` two-step workflows started beforehand (one serving
App, concurrency 10), through PgBouncer vs direct and on the cluster vs standalone; and
the idle start latency (a serving, idle App; a workflow started; its result read) through
PgBouncer with a direct listener (``?listen=``) vs direct. Each figure is the median of
``ROUNDS`` rounds, the two sides of a row alternating, so the machine's load shifts both.
PgBouncer and the servers are started here (Debian's ``pgbouncer``; ``redis-server``).

Beside each drain row, its ceilings measured in the same run: for PgBouncer, the same
drain over a direct connection run as through a transaction pooler (no prepared
statements, so the server plans every statement: no pooler without prepared statements
can do better); and the same number of plain round trips (``CONNECTIONS`` clients, each
sending one-statement transactions or single commands in turn) through the pooler vs
direct, and through redis-py's cluster client vs its standalone client. A pooler or a
cluster client that costs more per round trip than the bound allows puts the row out of
reach whatever durably does above it.

Run with ``python -m benchmarks.pooling`` (or ``make bench``).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from durably import Context
from durably.app import App

WORKFLOWS = 200
ROUNDS = 3
IDLE_SAMPLES = 10
CONNECTIONS = 10
TRIPS = 200
"""Round trips per client in a ceiling row (each client one connection)."""


def _app(dsn: str) -> tuple[App, object]:
    app = App(dsn, migrate=False)

    @app.step(name="bench_step")
    async def step(n: int) -> int:
        return n + 1

    @app.workflow(name="bench_two_steps")
    async def two(ctx: Context, n: int) -> int:
        return await step(await step(n))

    return app, two


async def drain(dsn: str) -> float:
    """Seconds to drain ``WORKFLOWS`` workflows started beforehand."""
    app, two = _app(dsn)
    async with app:
        run = uuid.uuid4().hex[:8]
        handles = [
            await two.start(n, id=f"b-{run}-{n}")  # type: ignore[attr-defined]
            for n in range(WORKFLOWS)
        ]
        started = time.perf_counter()
        serving = asyncio.create_task(app.serve(signals=False, poll=0.05, concurrency=10))
        try:
            for handle in handles:
                await handle.result(timeout=300)
            return time.perf_counter() - started
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)


async def idle_start(dsn: str) -> float:
    """Median seconds from starting a workflow on an idle serving App to its result."""
    app, two = _app(dsn)
    async with app:
        serving = asyncio.create_task(app.serve(signals=False, concurrency=10))
        try:
            await asyncio.sleep(1.0)  # idle, listening
            samples = []
            for n in range(IDLE_SAMPLES):
                started = time.perf_counter()
                handle = await two.start(n)  # type: ignore[attr-defined]
                await handle.result(timeout=60)
                samples.append(time.perf_counter() - started)
                await asyncio.sleep(0.3)
            return statistics.median(samples)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)


async def pg_round_trips(dsn: str) -> float:
    """Seconds for ``CONNECTIONS`` clients to each run ``TRIPS`` one-statement
    transactions, one after another (unprepared, as through a pooler)."""
    import psycopg

    parts = urlsplit(dsn)
    plain = urlunsplit(parts._replace(query=""))

    async def client() -> None:
        async with await psycopg.AsyncConnection.connect(plain, prepare_threshold=None) as c:
            for n in range(TRIPS):
                async with c.transaction():
                    await c.execute("SELECT %s::int + 1", (n,))

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CONNECTIONS)))
    return time.perf_counter() - started


async def redis_round_trips(dsn: str) -> float:
    """Seconds for ``CONNECTIONS`` clients to each send ``TRIPS`` ``INCR`` commands to keys
    spread over every slot, one after another (redis-py's cluster or standalone client)."""
    from redis.asyncio import Redis, RedisCluster

    if dsn.startswith("redis+cluster://"):
        first = dsn.removeprefix("redis+cluster://").split(",", 1)[0].rstrip("/")
        host, port = first.split(":")
        client: Any = RedisCluster(host=host, port=int(port))
    else:
        client = Redis.from_url(dsn)
    run = uuid.uuid4().hex[:8]

    async def one(c: int) -> None:
        for n in range(TRIPS):
            await client.incr(f"ceiling-{run}-{c}-{n % 50}")

    try:
        started = time.perf_counter()
        await asyncio.gather(*(one(c) for c in range(CONNECTIONS)))
        return time.perf_counter() - started
    finally:
        await client.aclose()


async def _row(label: str, measure, ours: str, base: str, bound: float) -> None:  # type: ignore[no-untyped-def]
    pairs = []
    for _ in range(ROUNDS):
        pairs.append((await measure(base), await measure(ours)))
    b = statistics.median(p[0] for p in pairs)
    o = statistics.median(p[1] for p in pairs)
    print(
        f"{label:58} {b * 1000:9.1f} {o * 1000:9.1f} {o / b:6.2f}x  (bound {bound:.2f}x)",
        flush=True,
    )


async def run() -> None:
    from tests.pg_service import create_database
    from tests.pgbouncer_service import through_pgbouncer
    from tests.redis_service import cluster_servers, durable_server

    direct = create_database("statement_timeout = 30000")
    async with App(direct):  # migrated over a direct connection
        pass
    print(f"{'row (ms: base, ours)':58} {'base':>9} {'ours':>9} {'ratio':>7}")
    await _row(
        f"drain {WORKFLOWS} workflows: PgBouncer (listen) vs direct",
        drain,
        through_pgbouncer(direct, listen=True),
        direct,
        1.15,
    )
    # The same drain direct, but as durably runs through any transaction pooler (no
    # prepared statements: the server parses and plans every statement; ?listen= names
    # the direct server itself): what the pooler's mode costs before the pooler does.
    unprepared = f"{direct}?pooler=transaction&listen={quote(direct, safe='')}"
    await _row(
        "  ceiling: drain direct, unprepared (as pooled) vs direct",
        drain,
        unprepared,
        direct,
        1.15,
    )
    await _row(
        f"  ceiling: {CONNECTIONS}x{TRIPS} plain transactions, PgBouncer vs direct",
        pg_round_trips,
        through_pgbouncer(direct),
        direct,
        1.15,
    )
    await _row(
        "idle start latency: PgBouncer with ?listen= vs direct",
        idle_start,
        through_pgbouncer(direct, listen=True),
        direct,
        2.0,
    )
    cluster = "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in cluster_servers())
    standalone = durable_server().url.rsplit("/", 1)[0] + "/5"
    await _row(
        f"drain {WORKFLOWS} workflows: 3-master cluster vs standalone",
        drain,
        cluster + "/",
        standalone,
        1.20,
    )
    await _row(
        f"  ceiling: {CONNECTIONS}x{TRIPS} commands, redis-py cluster vs standalone client",
        redis_round_trips,
        cluster,
        standalone,
        1.20,
    )
    from tests.pg_service import drop_created_databases

    drop_created_databases()


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
