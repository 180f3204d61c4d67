"""``durably doctor``: how many server connections one worker process takes over a DSN,
and what ``--workers N`` of them take against what the server allows.

Per worker process, from the DSN's ``?pool_size=`` (P), however many workflow kinds,
task queues and waiting handles it serves (they share one listening connection):

- PostgreSQL over psycopg: P + 1 connections to the server (the pool and the listening
  connection);
- PostgreSQL over asyncpg: P (the listening connection is one of the pool's);
- PostgreSQL through a transaction pooler (``?pooler=transaction``): P client connections
  to the pooler, which shares its own server connections among every client; and one
  direct listening connection to the server with ``?listen=`` (none without: waiters
  poll);
- Redis: P connections (the change feed's subscription is one of them, and an idle wait
  for work holds one while it waits);
- Redis Cluster: up to P connections to each master.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from durably.cli.stores import add_dsn, opened
from durably.stores.dsn import DEFAULT_POOL_SIZE, parse


@dataclass(frozen=True)
class Budget:
    """Connections one worker process opens to the server (each master of a cluster)."""

    pooled: int
    """The pool's, at most (through a transaction pooler: none to the server itself)."""
    listening: int
    """Listening connections outside the pool, straight to the server (0 or 1)."""
    note: str
    """How the figures were counted, in a line."""

    @property
    def per_process(self) -> int:
        """Server connections per worker process."""
        return self.pooled + self.listening


def budget(dsn: Any) -> Budget:
    """The connection budget of one worker process over ``dsn`` (no I/O)."""
    parsed = parse(dsn)
    if parsed.backing not in DEFAULT_POOL_SIZE:
        return Budget(0, 0, f"{parsed.backing} opens no server connections")
    pool = parsed.pool_size or DEFAULT_POOL_SIZE[parsed.backing]
    if parsed.backing == "redis":
        where = "each master" if parsed.cluster else "the server"
        return Budget(
            pool,
            0,
            f"pool of {pool} to {where}; the subscription and idle waits hold pooled connections",
        )
    if parsed.pooler == "transaction":
        listening = 1 if parsed.listen is not None else 0
        how = "one direct listening connection" if listening else "no listener (waiters poll)"
        return Budget(
            0,
            listening,
            f"pool of {pool} client connections to the pooler (its server pool is shared by "
            f"every client); {how}",
        )
    if parsed.driver == "asyncpg":
        return Budget(pool, 0, f"pool of {pool}, one of them listening for every store")
    return Budget(pool, 1, f"pool of {pool} + one listening connection for every store")


def register(commands: Any) -> None:
    doctor = commands.add_parser(
        "doctor",
        help="connections per worker process against the server's limit",
        description=(
            "Print how many server connections one worker process takes over --dsn (pool "
            "+ its listening connection) and what --workers processes take against the "
            "server's limit."
        ),
    )
    add_dsn(doctor)
    doctor.add_argument("--workers", type=_positive, default=1, help="worker processes (default 1)")
    doctor.set_defaults(run=run_doctor)


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= 100_000):
        raise argparse.ArgumentTypeError("a whole number from 1 to 100000")
    return int(text)


async def run_doctor(args: argparse.Namespace) -> int:
    async with opened(args) as stores:
        planned = budget(args.dsn)
        print(f"store: {stores.location}")
        print(
            f"per worker process: {planned.pooled} pooled + {planned.listening} listening "
            f"= {planned.per_process} server connections ({planned.note})"
        )
        servers = await _servers(stores)
    total = planned.per_process * args.workers
    for node, usable, used in servers:
        fits = "fits" if total <= usable - used else "does NOT fit"
        room = (usable - used) // planned.per_process if planned.per_process else None
        most = f"; at most {room} such processes" if room is not None else ""
        print(
            f"{node}: {args.workers} processes take {total} of {usable} usable connections, "
            f"{used} open now: {fits}{most}"
        )
    return 0


async def _servers(stores: Any) -> list[tuple[str, int, int]]:
    if stores.backing == "postgresql":
        from durably.postgres.budget import server_connections

        return await server_connections(stores.database)
    if stores.backing == "redis":
        from durably.redis.budget import server_connections as redis_connections

        return await redis_connections(stores.database)
    return []


__all__ = ["Budget", "budget", "register"]
