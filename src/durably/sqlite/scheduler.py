"""When each workflow may run next, in a SQLite file shared by any number of processes."""

from __future__ import annotations

import asyncio
import uuid

from durably.sqlite.connection import Database, Transaction
from durably.sqlite.statements import load_statements
from durably.stores.workflows import DEFAULT_LEASE, DEFAULT_NAMESPACE, Delivery
from durably.validation import finite, identifier, non_negative, positive

_SQL = load_statements("scheduler.sql")


class BoundSqliteScheduler:
    """The scheduler's operations inside an open `Transaction` (synchronous).

    Obtain it with `SqliteScheduler.bound(tx)`; `SqliteDurable` commits it together with
    the checkpointer's writes.
    """

    def __init__(self, tx: Transaction, namespace: str, lease: float) -> None:
        self._tx = tx
        self._namespace = namespace
        self._lease = lease

    def make_ready(self, workflow: str) -> None:
        """Create or set the entry ready, visible now, any hand-out forgotten."""
        self._tx.execute(
            _SQL["make_ready"],
            {"namespace": self._namespace, "workflow": workflow, "now": self._tx.store_now},
        )

    def take(self) -> Delivery | float | None:
        """Hand out the earliest visible ready entry; otherwise the seconds until the next
        becomes visible (store clock), or None if no entry is ready at all."""
        receipt = uuid.uuid4().hex
        params = {"namespace": self._namespace, "now": self._tx.store_now, "lease": self._lease}
        row = self._tx.one(_SQL["take_next"], {**params, "receipt": receipt})
        if row is not None:
            return Delivery(row["workflow"], receipt)
        return self.peek()

    def peek(self) -> float | None:
        """Seconds until a ready entry is visible (0 if one is now), None if none is ready."""
        upcoming = self._tx.row(_SQL["next_visible_at"], {"namespace": self._namespace})[0]
        return None if upcoming is None else max(0.0, float(upcoming) - self._tx.store_now)

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
        params = {"namespace": self._namespace, "until": now, "now": self._tx.store_now}
        return self._tx.execute(_SQL["wake_due"], params).rowcount

    def reclaim(self, idle: float) -> list[str]:
        """Make hand-outs older than ``idle`` seconds visible again, receipts forgotten;
        the workflows reclaimed."""
        params = {"namespace": self._namespace, "idle": idle, "now": self._tx.store_now}
        return [row[0] for row in self._tx.all(_SQL["reclaim"], params)]

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
        """Delete the entry if ``delivery`` is still its current hand-out."""
        params = {
            "namespace": self._namespace,
            "workflow": delivery.workflow,
            "receipt": delivery.receipt,
        }
        self._tx.execute(_SQL["done"], params)

    def cancel(self, workflow: str) -> None:
        """Delete the entry whatever its state."""
        self._tx.execute(_SQL["cancel"], {"namespace": self._namespace, "workflow": workflow})


class SqliteScheduler:
    """A `Scheduler` over a SQLite `Database`, one entry per (namespace, workflow).

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

    async def make_ready(self, workflow: str) -> None:
        """Make the workflow runnable now; survives a pass in flight."""
        identifier(workflow, "workflow")
        await self._db.transaction(lambda tx: self.bound(tx).make_ready(workflow))
        self._db.notify_ready()

    async def wake_at(self, delivery: Delivery, when: float) -> None:
        """Answer ``delivery`` and sleep until ``when`` (caller's clock), never pushing out
        a wakeup that arrived meanwhile."""
        identifier(delivery.workflow, "workflow")
        when = finite(when, "when")
        await self._db.transaction(lambda tx: self.bound(tx).wake_at(delivery, when))

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
