"""What a PostgreSQL server allows in connections, and what it has open now."""

from __future__ import annotations

from typing import Any

from durably.postgres import statements
from durably.postgres.executor import database_for
from durably.postgres.failures import RetryBudget

_STATEMENTS = statements.load("budget.sql")


async def server_connections(pool: Any) -> list[tuple[str, int, int]]:
    """One row, ``("server", usable, open)``: the connections clients may open
    (``max_connections`` less what superusers keep) and those open now. Read through
    ``pool`` (behind a pooler: the server's figures, as the pooler passes the query on)."""
    database = database_for(pool)
    async with database.session(RetryBudget().pool_timeout_seconds) as session:
        limit, reserved, used = (await session.fetch(_STATEMENTS["connections"]))[0]
    return [("server", int(limit) - int(reserved), int(used))]


__all__ = ["server_connections"]
