"""`PostgresDurable`: the transitions that cross records and wakeups, each in one
transaction, because both live in one database."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from durably.errors import ConfigurationError
from durably.postgres.checkpointer import PostgresCheckpointer, PostgresEffect
from durably.postgres.executor import Session
from durably.postgres.failures import state_errors
from durably.postgres.scheduler import PostgresScheduler
from durably.stores.workflows import Entry, Recorded, ready_priority, step_key
from durably.validation import identifier

T = TypeVar("T")


class PostgresDurable:
    """A `PostgresCheckpointer` and a `PostgresScheduler` over one pool (`durably.stores.Durable`).

    ``arrive``, ``deliver`` and ``delete`` each commit both of their writes or neither.
    Stores on different pools are refused with `ConfigurationError`.
    """

    def __init__(self, checkpointer: PostgresCheckpointer, scheduler: PostgresScheduler) -> None:
        if checkpointer.access.database.pool is not scheduler.access.database.pool:
            raise ConfigurationError(
                "PostgresDurable needs a checkpointer and a scheduler on the same pool, so "
                "each transition commits in one transaction; use SplitDurable otherwise"
            )
        self._checkpointer = checkpointer
        self._scheduler = scheduler

    @property
    def checkpointer(self) -> PostgresCheckpointer:
        return self._checkpointer

    @property
    def scheduler(self) -> PostgresScheduler:
        return self._scheduler

    async def arrive(
        self,
        workflow: str,
        key: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
    ) -> Recorded[object]:
        identifier(workflow, "workflow")
        step_key(key)
        if tenant is not None:
            identifier(tenant, "tenant")
        rank = ready_priority(priority)
        encoded = self._checkpointer.encode(value)

        async def run(session: Session) -> Recorded[object]:
            recorded = await self._checkpointer.supply_on(session, workflow, key, encoded)
            await self._scheduler.make_ready_on(session, workflow, tenant, rank)
            return recorded

        return await self._transaction(run)

    async def deliver(
        self,
        workflow: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
        unless_finished: bool = False,
    ) -> Entry:
        identifier(workflow, "workflow")
        if tenant is not None:
            identifier(tenant, "tenant")
        rank = ready_priority(priority)
        encoded = self._checkpointer.encode(value)

        async def run(session: Session) -> Entry:
            entry = await self._checkpointer.append_on(session, workflow, encoded, unless_finished)
            await self._scheduler.make_ready_on(session, workflow, tenant, rank)
            return entry

        return await self._transaction(run)

    async def delete(self, workflow: str) -> int:
        identifier(workflow, "workflow")

        async def run(session: Session) -> int:
            await self._scheduler.cancel_on(session, workflow)
            return await self._checkpointer.discard_on(session, workflow)

        return await self._transaction(run)

    async def close(self) -> None:
        """Close the checkpointer and the scheduler (stops the scheduler's listening
        connection; idempotent)."""
        await self._checkpointer.close()
        await self._scheduler.close()

    async def _transaction(self, run: Callable[[Session], Awaitable[T]]) -> T:
        return await self._checkpointer.access.run(run, errors=state_errors, transaction=True)


__all__ = ["PostgresDurable", "PostgresEffect"]
