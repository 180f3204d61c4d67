"""`PostgresDurable`: the transitions that cross records and wakeups, each in one
transaction, because both live in one database."""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import TypeVar

from durably.errors import ConfigurationError
from durably.postgres import statements
from durably.postgres.checkpointer import PostgresCheckpointer, PostgresEffect
from durably.postgres.executor import Session
from durably.postgres.failures import state_errors
from durably.postgres.scheduler import PostgresScheduler
from durably.postgres.state import PostgresStateStore
from durably.stores.admission import TenantCaps
from durably.stores.catalog import PENDING_TEXT
from durably.stores.runs import StateStore
from durably.stores.starting import WholeStart, WholeStarted
from durably.stores.workflows import DEFAULT_PRIORITY, Entry, Recorded, ready_priority, step_key
from durably.validation import identifier

T = TypeVar("T")

_TEMPLATES = statements.load("starting.sql", fragments_from=("scheduler.sql", "state.sql"))


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
        self._start_sql = statements.render(_TEMPLATES["start_whole"], checkpointer.tables.names)

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

    async def start_whole(
        self, start: WholeStart, *, caps: TenantCaps, state: StateStore
    ) -> WholeStarted:
        """Admit the start record and, for a first one, its catalog entry, run record and
        wakeup (`durably.stores.starting.StartingWhole`): in one statement, or, for a
        capped tenant (whose counts are read under a lock first), in one transaction."""
        tables = self._checkpointer.tables
        if (
            not isinstance(state, PostgresStateStore)
            or state.access.database.pool is not self._checkpointer.access.database.pool
            or state.tables != tables
            or self._scheduler.tables != tables
        ):
            raise ConfigurationError(
                "PostgresDurable.start_whole needs a PostgresStateStore on its own pool and tables"
            )
        rank = ready_priority(start.priority)
        encoded = self._checkpointer.encode(start.value)  # refused before any I/O
        rows = state.run_rows([start.run])
        if caps.capped:
            return await self._transaction(
                lambda session: self._start_in_steps(
                    session, start, encoded, caps, state, rows, rank
                )
            )
        entry = start.entry
        token = secrets.token_hex(8)  # one per call: tells its own retry from another start
        args = (
            self._scheduler.namespace,
            start.workflow,
            start.key,
            encoded,
            start.tenant,
            entry.kind,
            entry.parent,
            entry.created_us,
            PENDING_TEXT,
            json.dumps(rows[0]),
            token,
            tables.channel("workflow"),
            rank,
            DEFAULT_PRIORITY,
        )

        async def run(session: Session) -> WholeStarted:
            written, opened, _ = (await session.fetch(self._start_sql, *args))[0]
            if written:
                return WholeStarted(Recorded(start.value, True), bool(opened))
            recorded = await self._checkpointer.recorded_on(
                session, start.workflow, start.key, encoded
            )
            # A try of this call whose reply was lost after it committed wrote it all:
            # its run record carries this call's token.
            ours = recorded.first and await state.run_written_with(session, start.run, token)
            return WholeStarted(recorded, opened=ours)

        return await self._checkpointer.access.run(run, errors=state_errors)

    async def _start_in_steps(
        self,
        session: Session,
        start: WholeStart,
        encoded: str,
        caps: TenantCaps,
        state: PostgresStateStore,
        rows: list[dict[str, object]],
        rank: int | None,
    ) -> WholeStarted:
        """`start_whole`'s writes one statement at a time, in the caller's transaction."""
        recorded, wrote = await self._checkpointer.admit_on(
            session, start.workflow, start.key, encoded, start.tenant, caps
        )
        if not wrote:
            return WholeStarted(recorded, opened=False)
        await self._checkpointer.catalog_on(session, start.workflow, start.entry)
        opened = (await state.create_runs_on(session, rows))[0]
        if opened:
            await self._scheduler.make_ready_on(session, start.workflow, start.tenant, rank)
        return WholeStarted(recorded, opened)

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
