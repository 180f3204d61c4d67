"""How a store reaches the database: through its pool (retrying transient failures) or
bound to the caller's open transaction (retrying nothing)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar, TypeVarTuple

from durably.clock import Clock
from durably.postgres.executor import Database, Session, database_for, session_for
from durably.postgres.failures import ErrorFactory, RetryBudget, after_failure

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class Access:
    """Runs operations on a fresh pooled session, or on one bound session."""

    def __init__(self, database: Database, budget: RetryBudget, bound: Session | None = None):
        self.database = database
        self.budget = budget
        self.bound_session = bound

    @classmethod
    def over(cls, pool: Any, budget: RetryBudget, clock: Clock | None = None) -> Access:
        """Access through ``pool`` (psycopg or asyncpg), pausing between tries on ``clock``
        (the store's; the budget's own when None)."""
        return cls(database_for(pool), budget if clock is None else replace(budget, clock=clock))

    def bound(self, connection: Any) -> Access:
        """The same access running inside ``connection``'s open transaction."""
        return Access(self.database, self.budget, session_for(connection))

    async def run(
        self,
        operation: Callable[[Session, *Ts], Awaitable[T]],
        *args: *Ts,
        errors: ErrorFactory,
        transaction: bool = False,
    ) -> T:
        """``operation(session, *args)`` on a fresh pooled session, retrying transient
        errors, in a transaction of its own when ``transaction``; or once on the bound
        session, already inside the caller's transaction. What fails is mapped to
        durably's errors.

        Every store call passes here, so the loop is written out, and the hot writes pass
        their arguments rather than a closure built per call."""
        budget, bound = self.budget, self.bound_session
        tries = 1 if bound is not None else budget.max_attempts
        deadline: float | None = None  # the budget's time runs from the first failure
        for number in range(1, tries + 1):
            try:
                if bound is not None:
                    return await operation(bound, *args)
                async with self.database.session(budget.pool_timeout_seconds) as session:
                    if not transaction:
                        return await operation(session, *args)
                    async with session.transaction():
                        return await operation(session, *args)
            except Exception as error:
                if deadline is None:
                    deadline = budget.clock.now() + budget.budget_seconds
                pool_size = self.database.pool_size
                await after_failure(error, number, tries, budget, errors, pool_size, deadline)
        raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["Access"]
