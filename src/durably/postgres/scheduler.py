"""`PostgresScheduler`: one row per workflow in ``workflow_queue``, in a line per tenant,
tenants in rotation (``workflow_tenants``); taken with ``FOR UPDATE SKIP LOCKED``;
waiting takers wake on NOTIFY and poll only as a fallback."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Self, TypeVar

from durably.postgres import statements
from durably.postgres.connection import Access
from durably.postgres.executor import Row, Session
from durably.postgres.failures import RetryBudget, state_errors
from durably.postgres.migrate import verify
from durably.postgres.notify import Listener
from durably.postgres.schema import StateTables
from durably.postgres.settings import PostgresStoreSettings
from durably.stores.workflows import (
    DEFAULT_LEASE,
    DEFAULT_NAMESPACE,
    DEFAULT_PRIORITY,
    DEFAULT_TENANT,
    LAPSED_PER_TAKE,
    Delivery,
    Ready,
    new_priority,
    ready_batch,
    ready_priority,
    workflow_batch,
)
from durably.validation import finite, identifier, non_negative, positive

T = TypeVar("T")
_TEMPLATES = statements.load("scheduler.sql")
READ_FIRST = 8
"""Tenants of the rotation a take reads: enough that concurrent takes holding the first
tenants' workflows find another. A take that finds none free reads 8 times more, up to
`READ_MOST`."""
READ_MOST = 512
ROUNDS = 64
"""The most statements one take sends before it reports nothing ready: each round tidies
the tenants it read with empty lines, or reads further."""


class PostgresScheduler:
    """Wakeups in PostgreSQL (`durably.stores.Scheduler`), one entry per (namespace, workflow),
    tenants served in rotation (the fairness order in durably.stores.workflows)."""

    def __init__(
        self,
        pool: Any,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        lease: float = DEFAULT_LEASE,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
    ) -> None:
        self._namespace = identifier(namespace, "namespace")
        self._lease = positive(lease, "lease")
        self._tables = tables or StateTables()
        self._poll_seconds = settings.poll_seconds if settings else 1.0
        self._access = Access.over(pool, settings.retry if settings else RetryBudget())
        self._sql = statements.render_all(_TEMPLATES, self._tables.names)
        self._channel = self._tables.channel("workflow")
        self._listener = Listener(self._access.database, [self._channel])

    @classmethod
    async def open(
        cls,
        pool: Any,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        lease: float = DEFAULT_LEASE,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
    ) -> Self:
        """A scheduler after `verify` accepted the database."""
        await verify(pool, tables, durable=settings.durable if settings else True)
        return cls(pool, namespace=namespace, lease=lease, settings=settings, tables=tables)

    @property
    def lease(self) -> float:
        return self._lease

    @property
    def namespace(self) -> str:
        """The namespace this scheduler's entries live in (the Worker's workflow kind)."""
        return self._namespace

    @property
    def access(self) -> Access:
        """How this store reaches its database (shared with `PostgresDurable`)."""
        return self._access

    @property
    def tables(self) -> StateTables:
        """The tables this store writes (a `PostgresDurable` writes across them)."""
        return self._tables

    @property
    def listener(self) -> Listener:
        """The LISTEN connection behind `next_ready` (started on first wait)."""
        return self._listener

    async def close(self) -> None:
        """Stop the listening connection (the pool is the caller's)."""
        await self._listener.close()

    async def prepare(self) -> None:
        """Nothing to do: the schema is applied by `migrate`, never implicitly."""

    async def make_ready(
        self, workflow: str, *, tenant: str | None = None, priority: int | None = None
    ) -> None:
        identifier(workflow, "workflow")
        if tenant is not None:
            identifier(tenant, "tenant")
        rank = ready_priority(priority)
        await self._run(lambda s: self.make_ready_on(s, workflow, tenant, rank))

    async def make_ready_on(
        self, session: Session, workflow: str, tenant: str | None, priority: int | None = None
    ) -> None:
        """`make_ready` on ``session`` (for `PostgresDurable`)."""
        await session.fetch(
            self._sql["make_ready"],
            self._namespace,
            workflow,
            tenant,
            DEFAULT_TENANT,
            self._channel,
            priority,
            DEFAULT_PRIORITY,
        )

    async def make_ready_many(self, entries: Sequence[Ready]) -> None:
        """`make_ready` each entry, in one statement."""
        batch = ready_batch(entries)
        if not batch:
            return
        await self._run(
            lambda s: s.fetch(
                self._sql["make_ready_many"],
                self._namespace,
                [entry.workflow for entry in batch],
                [entry.tenant for entry in batch],
                DEFAULT_TENANT,
                self._channel,
                [entry.priority for entry in batch],
                DEFAULT_PRIORITY,
            )
        )

    async def cancel_many(self, workflows: Sequence[str]) -> None:
        """`cancel` each workflow, in one statement."""
        batch = workflow_batch(workflows)
        if batch:
            await self._run(lambda s: s.fetch(self._sql["cancel_many"], self._namespace, batch))

    async def next_ready(self, within: float) -> Delivery | None:
        within = non_negative(within, "within")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            event = None
            if within > 0:
                event = await self._listener.armed(self._channel, min(within, 1.0))
            receipt = uuid.uuid4().hex
            rows = await self._take(receipt)
            if rows:
                return Delivery(str(rows[0][0]), receipt)
            remaining = deadline - loop.time()
            if event is None or remaining <= 0:
                return None
            wait = min(remaining, self._poll_seconds)
            visible = await self._run(lambda s: s.fetch(self._sql["next_visible"], self._namespace))
            if visible and visible[0][0] is not None:
                # A taken entry comes back when its lease lapses, which nobody notifies.
                wait = min(wait, max(float(visible[0][0]), 0.0) + 0.005)
            await Listener.wait(event, wait)

    async def _take(self, receipt: str) -> Sequence[Row]:
        """The hand-out (a row of its workflow) or none, after the chores `take` asks for:
        lapsed hand-outs returned to their lines, tenants with empty lines tidied."""
        reading, lapsed = READ_FIRST, True
        for _ in range(ROUNDS):
            rows = await self._access.run(
                self._take_once, receipt, reading, lapsed, errors=state_errors
            )
            chores = {str(row[2]) for row in rows}
            tidied = await self._tidy([str(row[1]) for row in rows if row[2] == "tidy"])
            if "taken" in chores:
                return [row for row in rows if row[2] == "taken"]
            if "lapsed" in chores:
                await self._run(
                    lambda s: s.fetch(self._sql["return_lapsed"], self._namespace, LAPSED_PER_TAKE)
                )
                lapsed = False
            elif not tidied or "more" in chores:
                # Tenants read hold nothing free, or could not be tidied: read further.
                if reading >= READ_MOST:
                    return []
                reading *= 8
            elif "tidy" not in chores:
                return []
        return []

    async def _take_once(
        self, session: Session, receipt: str, reading: int, lapsed: bool
    ) -> Sequence[Row]:
        return await session.fetch(
            self._sql["take"], self._namespace, self._lease, receipt, reading, lapsed
        )

    async def _tidy(self, tenants: list[str]) -> bool:
        """Take each of ``tenants`` out of the rotation if its line is empty, each in a
        transaction of its own (locking one tenant row at a time); False if one could not
        be (a writer held it). Inside a caller's transaction nothing is tidied: that
        transaction may read one snapshot."""
        if not tenants:
            return True
        if self._access.bound_session is not None:
            return False
        tidied = True
        for tenant in tenants:
            tidied = await self._run(partial(self._tidy_one, tenant), transaction=True) and tidied
        return tidied

    async def _tidy_one(self, tenant: str, session: Session) -> bool:
        if not await session.fetch(self._sql["tidy_lock"], self._namespace, tenant):
            return False
        await session.fetch(self._sql["tidy"], self._namespace, tenant)
        return True

    async def done(self, delivery: Delivery) -> None:
        identifier(delivery.workflow, "workflow")
        await self._run(
            lambda s: s.fetch(
                self._sql["done"], self._namespace, delivery.workflow, delivery.receipt
            )
        )

    async def wake_at(self, delivery: Delivery, when: float) -> None:
        identifier(delivery.workflow, "workflow")
        when = finite(when, "when")
        await self._run(
            lambda s: s.fetch(
                self._sql["wake_at"], self._namespace, delivery.workflow, delivery.receipt, when
            )
        )

    async def wake_due(self, now: float) -> int:
        now = finite(now, "now")
        rows = await self._run(
            lambda s: s.fetch(self._sql["wake_due"], self._namespace, now, self._channel)
        )
        return int(rows[0][0])

    async def reclaim(self, idle: float) -> list[str]:
        idle = non_negative(idle, "idle")
        rows = await self._run(
            lambda s: s.fetch(self._sql["reclaim"], self._namespace, idle, self._channel)
        )
        return [row[0] for row in rows]

    async def reprioritize(self, workflow: str, priority: int) -> bool:
        identifier(workflow, "workflow")
        rank = new_priority(priority)
        rows = await self._run(
            lambda s: s.fetch(self._sql["reprioritize"], self._namespace, workflow, rank)
        )
        return bool(rows)

    async def extend(self, delivery: Delivery, within: float) -> bool:
        identifier(delivery.workflow, "workflow")
        within = positive(within, "within")
        rows = await self._run(
            lambda s: s.fetch(
                self._sql["extend"],
                self._namespace,
                delivery.workflow,
                delivery.receipt,
                within,
            )
        )
        return bool(rows)

    async def cancel(self, workflow: str) -> None:
        identifier(workflow, "workflow")
        await self._run(lambda s: self.cancel_on(s, workflow))

    async def cancel_on(self, session: Session, workflow: str) -> None:
        """`cancel` on ``session`` (for `PostgresDurable`)."""
        await session.fetch(self._sql["cancel"], self._namespace, workflow)

    async def _run(
        self, operation: Callable[[Session], Awaitable[T]], *, transaction: bool = False
    ) -> T:
        return await self._access.run(operation, errors=state_errors, transaction=transaction)


class Readying:
    """`PostgresScheduler.make_ready_on` for any namespace of ``tables``: what a write
    that admits a workflow outside its kind's scheduler (a gate's) makes it ready with."""

    def __init__(self, tables: StateTables) -> None:
        self._sql = statements.render(_TEMPLATES["make_ready"], tables.names)
        self._channel = tables.channel("workflow")

    async def make_ready_on(
        self,
        session: Session,
        namespace: str,
        workflow: str,
        tenant: str,
        priority: int | None = None,
    ) -> None:
        """Make ``workflow`` ready now in ``namespace``, in ``tenant``'s line at
        ``priority`` (None: the one it has), on ``session`` (inside the caller's
        transaction)."""
        await session.fetch(
            self._sql,
            namespace,
            workflow,
            tenant,
            DEFAULT_TENANT,
            self._channel,
            priority,
            DEFAULT_PRIORITY,
        )


__all__ = ["PostgresScheduler", "Readying"]
