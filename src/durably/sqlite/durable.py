"""`SqliteDurable`: the transitions that cross records and wakeups, each in one commit."""

from __future__ import annotations

from durably.errors import ConfigurationError
from durably.sqlite import catalog as _catalog
from durably.sqlite.checkpointer import SqliteCheckpointer, SqliteEffect
from durably.sqlite.connection import Transaction
from durably.sqlite.scheduler import SqliteScheduler
from durably.sqlite.state import SqliteStateStore
from durably.stores.admission import TenantCaps
from durably.stores.changes import ENDED, RECORDS
from durably.stores.runs import StateStore
from durably.stores.starting import WholeStart, WholeStarted
from durably.stores.workflows import Entry, Recorded, ready_priority, step_key
from durably.validation import identifier


class SqliteDurable:
    """A `Durable` whose `arrive`, `deliver` and `delete` each commit in one transaction.

    Raises `ConfigurationError` at construction unless the checkpointer and the scheduler
    share one `Database` (one connection is what makes the single commit possible).
    """

    def __init__(self, checkpointer: SqliteCheckpointer, scheduler: SqliteScheduler) -> None:
        if checkpointer.database is not scheduler.database:
            raise ConfigurationError(
                "SqliteDurable needs a checkpointer and a scheduler on the same Database "
                f"(got {checkpointer.database.path} and {scheduler.database.path}); "
                "use SplitDurable to compose stores that cannot commit together"
            )
        self._checkpointer = checkpointer
        self._scheduler = scheduler
        self._db = checkpointer.database

    async def close(self) -> None:
        """Close the checkpointer and the scheduler (idempotent)."""
        await self._checkpointer.close()
        await self._scheduler.close()

    @property
    def checkpointer(self) -> SqliteCheckpointer:
        """Where records and claims live."""
        return self._checkpointer

    @property
    def scheduler(self) -> SqliteScheduler:
        """Where wakeups live."""
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
        """Supply ``key`` (first writer wins) and make the workflow ready for ``tenant``
        at ``priority``, in one commit."""
        identifier(workflow, "workflow")
        step_key(key)
        if tenant is not None:
            identifier(tenant, "tenant")
        rank = ready_priority(priority)
        encoded = self._checkpointer.encode(value)

        def arrive(tx: Transaction) -> Recorded[object]:
            recorded = self._checkpointer.bound(tx).insert(workflow, key, encoded)
            self._scheduler.bound(tx).make_ready(workflow, tenant, rank)
            return recorded

        recorded = await self._db.transaction(arrive)
        self._db.notify_ready()
        self._checkpointer.announce(workflow, RECORDS)
        return recorded

    async def deliver(
        self,
        workflow: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
        unless_finished: bool = False,
    ) -> Entry:
        """Append a message and make the workflow ready for ``tenant`` at ``priority``, in
        one commit; with ``unless_finished``, `WorkflowFinishedError` for a finished
        workflow (nothing written or woken)."""
        identifier(workflow, "workflow")
        if tenant is not None:
            identifier(tenant, "tenant")
        rank = ready_priority(priority)
        encoded = self._checkpointer.encode(value)

        def deliver(tx: Transaction) -> Entry:
            entry = self._checkpointer.bound(tx).append(workflow, encoded, unless_finished)
            self._scheduler.bound(tx).make_ready(workflow, tenant, rank)
            return entry

        entry = await self._db.transaction(deliver)
        self._db.notify_ready()
        self._checkpointer.announce(workflow, RECORDS)
        return entry

    async def start_whole(
        self, start: WholeStart, *, caps: TenantCaps, state: StateStore
    ) -> WholeStarted:
        """Admit the start record and, for a first one, its catalog entry, run record and
        wakeup, in one commit (`durably.stores.starting.StartingWhole`)."""
        if not isinstance(state, SqliteStateStore) or state.database is not self._db:
            raise ConfigurationError(
                "SqliteDurable.start_whole needs a SqliteStateStore on its own Database"
            )
        rank = ready_priority(start.priority)
        encoded = self._checkpointer.encode(start.value)  # refused before the write
        run, text = state.prepared_run(start.run)

        def write(tx: Transaction) -> WholeStarted:
            checkpointer = self._checkpointer.bound(tx)
            fresh = checkpointer.recorded(start.workflow, start.key) is None
            recorded = checkpointer.admit(
                start.workflow, start.key, encoded, tenant=start.tenant, caps=caps
            )
            if not fresh:  # an earlier start's (``first`` where it equals this one's)
                return WholeStarted(recorded, opened=False)
            _catalog.enter(tx, start.workflow, start.entry)
            opened = state.bound(tx).create_run(start.run, run, text)
            if opened:
                self._scheduler.bound(tx).make_ready(start.workflow, start.tenant, rank)
            return WholeStarted(recorded, opened)

        started = await self._db.transaction(write)
        if started.opened:
            self._db.notify_ready()
        return started

    async def delete(self, workflow: str) -> int:
        """Cancel the workflow's wakeups and discard its records in one commit; the count."""
        identifier(workflow, "workflow")

        def delete(tx: Transaction) -> int:
            self._scheduler.bound(tx).cancel(workflow)
            return self._checkpointer.bound(tx).discard(workflow)

        deleted = await self._db.transaction(delete)
        self._db.notify_ready()  # its gate may have admitted the next in line
        self._checkpointer.announce(workflow, ENDED)
        return deleted


__all__ = ["SqliteDurable", "SqliteEffect"]
