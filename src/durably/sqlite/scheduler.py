"""When each workflow may run next, in a SQLite file shared by any number of processes."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Sequence

from durably.sqlite.connection import Database, Transaction
from durably.sqlite.statements import load_statements
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

_SQL = load_statements("scheduler.sql")


class BoundSqliteScheduler:
    """The scheduler's operations inside an open `Transaction` (synchronous).

    Obtain it with `SqliteScheduler.bound(tx)`; `SqliteDurable` commits it together with
    the checkpointer's writes. Every change to an entry keeps its tenant's place in the
    rotation (``durably_workflow_tenants``) exact in the same transaction.
    """

    def __init__(self, tx: Transaction, namespace: str, lease: float) -> None:
        self._tx = tx
        self._namespace = namespace
        self._lease = lease

    def make_ready(
        self, workflow: str, tenant: str | None = None, priority: int | None = None
    ) -> None:
        """Create or set the entry ready, visible now, any hand-out forgotten, in
        ``tenant``'s line at ``priority`` (None: the tenant or priority it has)."""
        key = {"namespace": self._namespace, "workflow": workflow}
        entry = self._tx.one(_SQL["get_entry"], key)
        owner = tenant or (entry["tenant"] if entry is not None else DEFAULT_TENANT)
        if priority is None:
            priority = DEFAULT_PRIORITY if entry is None else entry["priority"]
        now = self._tx.store_now
        if entry is not None and _kept(entry, owner, priority, now):
            return
        params = {**key, "tenant": owner, "priority": priority, "now": now}
        self._tx.execute(_SQL["make_ready"], params)
        if entry is not None and _queued(entry):
            self._settle(entry["tenant"], served=False)  # its line lost or moved this one
            if entry["tenant"] == owner:
                return
        self._place(owner, now, workflow)

    def reprioritize(self, workflow: str, priority: int) -> bool:
        """Serve the entry at ``priority`` from now on; False when there is none."""
        params = {"namespace": self._namespace, "workflow": workflow, "priority": priority}
        return bool(self._tx.execute(_SQL["reprioritize"], params).rowcount)

    def take(self) -> Delivery | float | None:
        """Hand out the first ready workflow in the fairness order; otherwise the seconds
        until one becomes visible (store clock), or None if no entry is ready at all."""
        tx, now = self._tx, self._tx.store_now
        params = {"namespace": self._namespace, "now": now}
        lapsed = tx.all(_SQL["return_lapsed"], {**params, "most": LAPSED_PER_TAKE})
        for tenant, at, workflow in lapsed:
            self._place(tenant, at, workflow)
        while True:
            receipt = uuid.uuid4().hex
            row = tx.one(_SQL["take_first"], {**params, "lease": self._lease, "receipt": receipt})
            if row is not None:
                self._settle(row["tenant"], served=True)
                return Delivery(row["workflow"], receipt)
            found = tx.one(_SQL["next_tenant"], params)
            if found is None:
                return self.peek()
            # A tenant in the rotation has a queued workflow unless the table was written
            # outside this scheduler: put it where its line says, and look again.
            self._settle(found[0], served=False)

    def peek(self) -> float | None:
        """Seconds until a ready entry is visible (0 if one is now), None if none is ready."""
        now = self._tx.store_now
        upcoming = self._tx.row(
            _SQL["next_visible_at"], {"namespace": self._namespace, "now": now}
        )[0]
        return None if upcoming is None else max(0.0, float(upcoming) - now)

    def wake_at(self, delivery: Delivery, when: float) -> None:
        """Answer ``delivery`` with a wakeup at ``when``, never postponing a newer one."""
        key = {"namespace": self._namespace, "workflow": delivery.workflow}
        entry = self._tx.one(_SQL["get_entry"], key)
        if entry is None:
            return
        if entry["receipt"] == delivery.receipt:
            self._tx.execute(_SQL["sleep_until"], {**key, "due": when})
        elif entry["state"] == "sleeping":
            self._tx.execute(_SQL["sleep_until"], {**key, "due": min(entry["due"], when)})

    def wake_due(self, now: float) -> int:
        """Make every sleeping entry due at or before ``now`` (caller's clock) ready."""
        store_now = self._tx.store_now
        params = {"namespace": self._namespace, "until": now, "now": store_now}
        return self._queued(self._tx.all(_SQL["wake_due"], params), store_now)

    def reclaim(self, idle: float) -> list[str]:
        """Make hand-outs older than ``idle`` seconds visible again, receipts forgotten;
        the workflows reclaimed."""
        store_now = self._tx.store_now
        params = {"namespace": self._namespace, "idle": idle, "now": store_now}
        rows = self._tx.all(_SQL["reclaim"], params)
        self._queued(rows, store_now)
        return [row["workflow"] for row in rows]

    def extend(self, delivery: Delivery, within: float) -> bool:
        """Keep ``delivery`` invisible for ``within`` more seconds if it is still held."""
        params = {
            "namespace": self._namespace,
            "workflow": delivery.workflow,
            "receipt": delivery.receipt,
            "within": within,
            "now": self._tx.store_now,
        }
        return self._tx.execute(_SQL["extend"], params).rowcount > 0

    def done(self, delivery: Delivery) -> None:
        """Delete the entry if ``delivery`` is still its current hand-out (a hand-out in
        flight is in no tenant's line)."""
        params = {
            "namespace": self._namespace,
            "workflow": delivery.workflow,
            "receipt": delivery.receipt,
        }
        self._tx.execute(_SQL["done"], params)

    def cancel(self, workflow: str) -> None:
        """Delete the entry whatever its state."""
        key = {"namespace": self._namespace, "workflow": workflow}
        entry = self._tx.one(_SQL["cancel"], key)
        if entry is not None and _queued(entry):
            self._settle(entry["tenant"], served=False)

    def _queued(self, rows: list[sqlite3.Row], at: float) -> int:
        """Place the tenants of ``rows``, each made ready at ``at``; the count."""
        first: dict[str, str] = {}
        for tenant, workflow in rows:
            if tenant not in first or workflow < first[tenant]:
                first[tenant] = workflow
        for tenant, workflow in first.items():
            self._place(tenant, at, workflow)
        return len(rows)

    def _place(self, tenant: str, at: float, workflow: str) -> None:
        """``tenant`` has a newly queued workflow: it joins the rotation (`place_tenant`)."""
        params = {"namespace": self._namespace, "tenant": tenant, "at": at, "workflow": workflow}
        self._tx.execute(_SQL["place_tenant"], params)

    def _settle(self, tenant: str, *, served: bool) -> None:
        """Put ``tenant`` where its line now says, sent to the back if it was ``served``."""
        params = {"namespace": self._namespace, "tenant": tenant, "served": served}
        self._tx.execute(_SQL["settle_tenant"], params)


def _queued(entry: sqlite3.Row) -> bool:
    """Whether ``entry`` stood in its tenant's line: ready, no hand-out in flight."""
    return bool(entry["state"] == "ready" and entry["receipt"] is None)


def _kept(entry: sqlite3.Row, tenant: str, priority: int, now: float) -> bool:
    """Whether making ``entry`` ready in ``tenant``'s line at ``priority`` leaves it as it
    is: it is queued so already, and visible (it keeps its place in line)."""
    return (
        _queued(entry)
        and entry["visible_at"] <= now
        and entry["tenant"] == tenant
        and entry["priority"] == priority
    )


class SqliteScheduler:
    """A `Scheduler` over a SQLite `Database`, one entry per (namespace, workflow), its
    tenants served in rotation (the fairness order in durably.stores.workflows).

    Hand-outs are timed by SQLite's clock; sleeping entries are due on the caller's clock.
    `next_ready` wakes at once for work made ready through the same `Database` and polls
    (``settings.poll_seconds``) for work other processes make ready.
    """

    def __init__(
        self,
        database: Database,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        self._db = database
        self._lease = positive(lease, "lease")
        self._namespace = identifier(namespace, "namespace")

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the database is its owner's."""

    @property
    def lease(self) -> float:
        """Seconds a delivery stays invisible to other takers."""
        return self._lease

    @property
    def namespace(self) -> str:
        """The namespace this scheduler's entries live in."""
        return self._namespace

    @property
    def database(self) -> Database:
        """The database this scheduler lives in."""
        return self._db

    def bound(self, tx: Transaction) -> BoundSqliteScheduler:
        """This scheduler's operations inside the open transaction ``tx``."""
        return BoundSqliteScheduler(tx, self._namespace, self._lease)

    async def prepare(self) -> None:
        """Nothing to do: `connect` created the tables."""

    async def make_ready(
        self, workflow: str, *, tenant: str | None = None, priority: int | None = None
    ) -> None:
        """Make the workflow runnable now in ``tenant``'s turn at ``priority`` (None: the
        tenant or priority it has); survives a pass in flight."""
        identifier(workflow, "workflow")
        if tenant is not None:
            identifier(tenant, "tenant")
        rank = ready_priority(priority)
        await self._db.transaction(lambda tx: self.bound(tx).make_ready(workflow, tenant, rank))
        self._db.notify_ready()

    async def make_ready_many(self, entries: Sequence[Ready]) -> None:
        """`make_ready` each entry, in one transaction."""
        batch = ready_batch(entries)
        if not batch:
            return

        def run(tx: Transaction) -> None:
            bound = self.bound(tx)
            for entry in batch:
                bound.make_ready(entry.workflow, entry.tenant, ready_priority(entry.priority))

        await self._db.transaction(run)
        self._db.notify_ready()

    async def cancel_many(self, workflows: Sequence[str]) -> None:
        """`cancel` each workflow, in one transaction."""
        batch = workflow_batch(workflows)
        if not batch:
            return

        def run(tx: Transaction) -> None:
            bound = self.bound(tx)
            for workflow in batch:
                bound.cancel(workflow)

        await self._db.transaction(run)

    async def wake_at(self, delivery: Delivery, when: float) -> None:
        """Answer ``delivery`` and sleep until ``when`` (caller's clock), never pushing out
        a wakeup that arrived meanwhile."""
        identifier(delivery.workflow, "workflow")
        when = finite(when, "when")
        await self._db.transaction(lambda tx: self.bound(tx).wake_at(delivery, when))

    async def reprioritize(self, workflow: str, priority: int) -> bool:
        """Serve the workflow's entry at ``priority`` from now on, its visibility kept;
        False when it has none."""
        identifier(workflow, "workflow")
        rank = new_priority(priority)
        return await self._db.transaction(lambda tx: self.bound(tx).reprioritize(workflow, rank))

    async def wake_due(self, now: float) -> int:
        """Make every sleeping entry due at or before ``now`` ready; the count woken."""
        now = finite(now, "now")
        woken = await self._db.transaction(lambda tx: self.bound(tx).wake_due(now))
        if woken:
            self._db.notify_ready()
        return woken

    async def next_ready(self, within: float) -> Delivery | None:
        """Take one ready workflow, waiting up to ``within`` seconds (0: do not wait)."""
        within = non_negative(within, "within")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        poll = self._db.settings.poll_seconds
        while True:
            # Take the pulse before looking, so a make_ready in between is not missed.
            pulse = self._db.ready_pulse()
            # Look without the write lock first: idle pollers must not queue up writers.
            found = await self._db.transaction(lambda tx: self.bound(tx).peek(), write=False)
            if found == 0.0:
                taken = await self._db.transaction(lambda tx: self.bound(tx).take())
                if isinstance(taken, Delivery):
                    return taken
                found = taken
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            wait = min(remaining, poll if found is None else min(poll, found))
            try:
                await asyncio.wait_for(pulse.wait(), timeout=wait)
            except TimeoutError:
                pass

    async def reclaim(self, idle: float) -> list[str]:
        """Make deliveries taken ``idle`` or more seconds ago visible again (0: all); the
        workflows reclaimed."""
        idle = non_negative(idle, "idle")
        reclaimed = await self._db.transaction(lambda tx: self.bound(tx).reclaim(idle))
        if reclaimed:
            self._db.notify_ready()
        return reclaimed

    async def extend(self, delivery: Delivery, within: float) -> bool:
        """Keep ``delivery`` invisible ``within`` more seconds; False if not held."""
        identifier(delivery.workflow, "workflow")
        within = positive(within, "within")
        return await self._db.transaction(lambda tx: self.bound(tx).extend(delivery, within))

    async def cancel(self, workflow: str) -> None:
        """Remove the workflow's ready, sleeping or in-flight entry."""
        identifier(workflow, "workflow")
        await self._db.transaction(lambda tx: self.bound(tx).cancel(workflow))

    async def done(self, delivery: Delivery) -> None:
        """Answer ``delivery``; a wakeup that arrived meanwhile stays."""
        identifier(delivery.workflow, "workflow")
        await self._db.transaction(lambda tx: self.bound(tx).done(delivery))


__all__ = ["BoundSqliteScheduler", "SqliteScheduler"]
