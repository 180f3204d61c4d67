"""How a store reaches the database: through its pool (retrying transient failures) or
bound to the caller's open transaction (retrying nothing)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from durably.postgres.executor import Database, Session, database_for, session_for
from durably.postgres.failures import ErrorFactory, RetryBudget, after_failure, attempt

T = TypeVar("T")


class Access:
    """Runs operations on a fresh pooled session, or on one bound session."""

    def __init__(self, database: Database, budget: RetryBudget, bound: Session | None = None):
        self.database = database
        self.budget = budget
        self.bound_session = bound

    @classmethod
    def over(cls, pool: Any, budget: RetryBudget) -> Access:
        """Access through ``pool`` (psycopg or asyncpg)."""
        return cls(database_for(pool), budget)

    def bound(self, connection: Any) -> Access:
        """The same access running inside ``connection``'s open transaction."""
        return Access(self.database, self.budget, session_for(connection))

    async def run(
        self,
        operation: Callable[[Session], Awaitable[T]],
        *,
        errors: ErrorFactory,
        transaction: bool = False,
    ) -> T:
        """``operation`` on a session; in a transaction of its own when ``transaction`` (a
        bound session is already inside the caller's)."""
        bound = self.bound_session
        if bound is not None:
            return await attempt(
                lambda: operation(bound), budget=self.budget, errors=errors, retry=False
            )

        # `attempt`'s loop, written out: every store call passes here, and a closure and
        # two coroutines fewer per call are measurable on the one-statement writes.
        budget = self.budget
        tries = budget.max_attempts
        for number in range(1, tries + 1):
            try:
                async with self.database.session(budget.pool_timeout_seconds) as session:
                    if not transaction:
                        return await operation(session)
                    async with session.transaction():
                        return await operation(session)
            except Exception as error:
                await after_failure(error, number, tries, budget, errors)
        raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["Access"]
