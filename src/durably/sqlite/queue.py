"""Work items in a SQLite file: one `BEGIN IMMEDIATE` per operation, claims included."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

from durably.clock import Clock, SystemClock
from durably.errors import (
    DurablyError,
    LeaseLostError,
    QueueUnavailableError,
    StatePersistenceError,
    WorkItemNotFoundError,
)
from durably.sqlite.connection import Database, Transaction
from durably.sqlite.statements import load_statements
from durably.stores.debounce import Begun, begin_call, debounce_call, release_call, slot_call
from durably.stores.flow import throttle_admits
from durably.stores.throughput import (
    Minute,
    first_minute,
    minute_of,
    rated,
    rated_queues,
    slot_of,
)
from durably.stores.work import (
    DEAD_PURGE_BATCH,
    DEDUPE_SWEEP_BATCH,
    DEFAULT_QUEUE,
    QUEUE_NAMES_MOST,
    DeadLetterPage,
    QueuePolicy,
    QueueStats,
    Settlement,
    WorkItem,
    WorkPriority,
    WorkState,
    batch_items,
    batch_limit,
    checked_item,
    dead_letter_limit,
    dead_letter_query,
    dead_letter_target,
    dedupe_window,
    failure_text,
    in_batches,
    names_limit,
    payload_text,
    retry_instant,
    sequence_cursor,
    settle_keys,
    tick_mark,
)
from durably.validation import identifier, non_negative, within_size

_SQL = load_statements("queue.sql")
_REAPED_ERROR = "lease expired"
_ADOPTED_ERROR = "adopted after restart"


def _payload(row: sqlite3.Row) -> dict[str, str]:
    """The payload of an item's row, decoded."""
    payload: dict[str, str] = json.loads(row["payload"])
    return payload


def _item(row: sqlite3.Row) -> WorkItem:
    return WorkItem(
        id=row["id"],
        tenant=row["tenant"],
        queue=row["queue"],
        payload=json.loads(row["payload"]),
        priority=WorkPriority(row["priority"]),
        dedupe_key=row["dedupe_key"],
        attempts=row["attempts"],
        state=WorkState(row["state"]),
        worker=row["worker"],
        enqueued_at=row["enqueued_at"],
        available_at=row["available_at"],
        lease_expires_at=row["lease_expires_at"],
        first_claimed_at=row["first_claimed_at"],
        claimed_at=row["claimed_at"],
        failures=tuple(json.loads(row["failures"])),
        concurrency_key=row["concurrency_key"],
        concurrency_limit=row["concurrency_limit"],
        throttle_key=row["throttle_key"],
        throttle_seconds=row["throttle_seconds"],
        throttle_burst=row["throttle_burst"],
    )


class BoundSqliteWorkQueue:
    """The queue's operations inside an open `Transaction` (synchronous).

    Obtain it with `SqliteWorkQueue.bound(tx)` inside `Database.transaction`, e.g. to queue
    work in the same commit as the run that asks for it. Same semantics as `SqliteWorkQueue`.
    """

    def __init__(
        self, tx: Transaction, clock: Clock, policy: QueuePolicy, max_value_bytes: int
    ) -> None:
        self._tx = tx
        self._clock = clock
        self._policy = policy
        self._max_bytes = max_value_bytes

    def enqueue(self, item: WorkItem, *, dedupe_ttl: float | None = None) -> WorkItem:
        """Queue ``item``; a live item with its id or dedupe key is returned unchanged, and
        so is a finished one whose key is kept (``dedupe_ttl``)."""
        payload = payload_text(checked_item(item).payload)
        payload = within_size(payload, self._max_bytes, "payload", "sqlite")
        return self._enqueue(
            item, payload, None if dedupe_ttl is None else dedupe_window(dedupe_ttl)
        )

    def _enqueue(self, item: WorkItem, payload: str, ttl: float | None = None) -> WorkItem:
        """`enqueue` of a checked item whose payload is rendered (``payload``)."""
        tx = self._tx
        existing = tx.one(_SQL["get_item"], {"tenant": item.tenant, "id": item.id})
        live = existing if existing is not None and existing["state"] in _LIVE else None
        if live is None and item.dedupe_key is not None:
            key = {"tenant": item.tenant, "queue": item.queue, "dedupe_key": item.dedupe_key}
            live = tx.one(_SQL["live_by_dedupe_key"], key)
            if live is None:
                kept = tx.one(_SQL["kept_by_dedupe_key"], {**key, "now": self._clock.now()})
                if kept is not None:
                    tx.execute(_SQL["count_duplicate"], {"queue": item.queue})
                    return WorkItem.model_validate_json(kept["item"])
        if live is not None:
            tx.execute(_SQL["count_duplicate"], {"queue": live["queue"]})
            return _item(live)
        if existing is not None:
            # A terminal item frees its id: the new one replaces it.
            tx.execute(_SQL["delete_item"], {"seq": existing["seq"]})
        now = self._clock.now()
        row = tx.row(
            _SQL["insert_item"],
            {
                "tenant": item.tenant,
                "id": item.id,
                "queue": item.queue,
                "payload": payload,
                "priority": int(item.priority),
                "dedupe_key": item.dedupe_key,
                "attempts": item.attempts,
                "enqueued_at": now,
                "available_at": now if item.available_at is None else item.available_at,
                "failures": json.dumps(list(item.failures)),
                "concurrency_key": item.concurrency_key,
                "concurrency_limit": item.concurrency_limit,
                "throttle_key": item.throttle_key,
                "throttle_seconds": item.throttle_seconds,
                "throttle_burst": item.throttle_burst,
            },
        )
        self._place(row, now)
        tx.work_added = True
        if ttl is not None and item.dedupe_key is not None:
            tx.execute(
                _SQL["keep_dedupe_key"],
                {
                    "tenant": item.tenant,
                    "queue": item.queue,
                    "dedupe_key": item.dedupe_key,
                    "id": item.id,
                    "ttl": ttl,
                },
            )
        return _item(row)

    def _finished(self, item: WorkItem) -> None:
        """Count the just-finished ``item`` in its queue's minute, and start the time to
        live of its dedupe key, if kept."""
        minute = minute_of(self._clock.now())
        failed = int(item.state is WorkState.DEAD_LETTERED)
        self._tx.execute(
            _SQL["count_finished"],
            {"queue": item.queue, "slot": slot_of(minute), "minute": minute, "failed": failed},
        )
        if item.dedupe_key is None:
            return
        self._tx.execute(
            _SQL["finish_dedupe_key"],
            {
                "tenant": item.tenant,
                "queue": item.queue,
                "dedupe_key": item.dedupe_key,
                "id": item.id,
                "now": self._clock.now(),
                "item": item.model_dump_json(),
            },
        )

    def _place(self, row: sqlite3.Row, now: float) -> None:
        """Keep the rotation index (`place_tenant`) up to date with the queued item ``row``."""
        self._tx.execute(
            _SQL["place_tenant"],
            {
                "queue": row["queue"],
                "tenant": row["tenant"],
                "at": row["available_at"],
                "seq": row["seq"],
                "now": now,
            },
        )

    def claim(
        self, *, worker: str, queue: str = DEFAULT_QUEUE, lease_seconds: float | None = None
    ) -> WorkItem | None:
        """Take one due item: tenants in rotation, then priority, then age; None if none."""
        tx = self._tx
        now = self._clock.now()
        lease = self._policy.lease_for(lease_seconds)
        tx.execute(_SQL["promote_due"], {"queue": queue, "now": now})
        passed: list[str] = []  # tenants whose due items are all held by flow gates
        while (
            found := tx.one(
                _SQL["next_tenant"],
                {"queue": queue, "passed": json.dumps(passed) if passed else None},
            )
        ) is not None:
            tenant = found[0]
            row = tx.one(
                _SQL["claim_next_of_tenant"],
                {
                    "queue": queue,
                    "tenant": tenant,
                    "worker": worker,
                    "now": now,
                    "lease_expires_at": now + lease,
                },
            )
            if row is None and tx.one(
                _SQL["has_due_of_tenant"], {"queue": queue, "tenant": tenant, "now": now}
            ):
                passed.append(tenant)  # gated, not served: its turn stays
                continue
            if row is not None and row["throttle_key"] is not None:
                self._note_throttled(row, now)
            head = self._oldest(queue, tenant)
            tx.execute(
                _SQL["send_tenant_to_back"],
                {
                    "queue": queue,
                    "tenant": tenant,
                    "head_at": None if head is None else head[0],
                    "head_seq": None if head is None else head[1],
                    "now": now,
                },
            )
            # A tenant in the rotation has a due item unless the table was written outside
            # this queue; it has just been put where its items say, so look again.
            if row is not None:
                return _item(row)
        return None

    def _note_throttled(self, row: sqlite3.Row, now: float) -> None:
        """Move the claimed item's throttle key's arrival time on (`throttle_admits`)."""
        key = {"queue": row["queue"], "key": row["throttle_key"]}
        found = self._tx.one(_SQL["get_throttle"], key)
        tat = throttle_admits(
            None if found is None else found[0],
            now,
            row["throttle_seconds"],
            row["throttle_burst"],
        )
        assert tat is not None  # the claim's own predicate let it through at ``now``
        self._tx.execute(_SQL["set_throttle"], {**key, "tat": tat})

    def _oldest(self, queue: str, tenant: str) -> tuple[float, int] | None:
        """The (availability, seq) of the tenant's oldest queued item, if it has one."""
        heads = [
            self._tx.one(
                _SQL["oldest_of_priority"],
                {"queue": queue, "tenant": tenant, "priority": int(priority)},
            )
            for priority in WorkPriority
        ]
        return min(((row[0], row[1]) for row in heads if row is not None), default=None)

    def _held(
        self, item_id: str, tenant: str, worker: str, *, renewing: bool = False
    ) -> sqlite3.Row:
        # The fence shared by heartbeat, complete and fail.
        row = self._tx.one(_SQL["get_item"], {"tenant": tenant, "id": item_id})
        if row is None or row["state"] == WorkState.COMPLETED:  # a completed item is gone
            raise WorkItemNotFoundError(item_id, tenant)
        if row["state"] != WorkState.CLAIMED or row["worker"] != worker:
            holder = row["worker"] if row["state"] == WorkState.CLAIMED else None
            raise LeaseLostError(item_id, worker, holder, "taken")
        now = self._clock.now()
        # A lease that ran to the cap has also lapsed; the cap is the reason to report.
        if renewing and now - row["claimed_at"] >= self._policy.max_lease_seconds:
            raise LeaseLostError(item_id, worker, worker, "capped")
        if row["lease_expires_at"] <= now:
            raise LeaseLostError(item_id, worker, worker, "expired")
        return row

    def claim_many(
        self, *, worker: str, queue: str, lease_seconds: float | None, limit: int
    ) -> list[WorkItem]:
        """Up to ``limit`` claims in this transaction, as that many single claims."""
        taken: list[WorkItem] = []
        for _ in range(limit):
            item = self.claim(worker=worker, queue=queue, lease_seconds=lease_seconds)
            if item is None:
                break
            taken.append(item)
        return taken

    def heartbeat(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Extend the lease (never past ``max_lease_seconds`` since the claim)."""
        row = self._held(item_id, tenant, worker, renewing=True)
        now = self._clock.now()
        cap = row["claimed_at"] + self._policy.max_lease_seconds
        lease_expires_at = min(now + self._policy.lease_seconds, cap)
        updated = self._tx.row(
            _SQL["extend_lease"],
            {"seq": row["seq"], "worker": worker, "lease_expires_at": lease_expires_at},
        )
        return _item(updated)

    def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Finish the item; fenced like `heartbeat`."""
        row = self._held(item_id, tenant, worker)
        done = _item(self._tx.row(_SQL["complete_item"], {"seq": row["seq"], "worker": worker}))
        self._finished(done)
        return done

    def complete_many(
        self, items: Sequence[tuple[str, str]], *, worker: str
    ) -> list[WorkItem | DurablyError]:
        """`complete` for each ``(item_id, tenant)``, each fenced on its own lease: per
        item, in order, the completed item or the error `complete` would have raised."""
        results: list[WorkItem | DurablyError] = []
        for item_id, tenant in settle_keys(items, worker):
            try:
                results.append(self.complete(item_id, tenant=tenant, worker=worker))
            except (LeaseLostError, WorkItemNotFoundError) as lost:
                results.append(lost)
        return results

    def fail(
        self,
        item_id: str,
        *,
        tenant: str,
        worker: str,
        error: str,
        retryable: bool = True,
        retry_at: float | None = None,
    ) -> WorkItem:
        """Count a failed attempt: requeue with backoff (at ``retry_at`` when given) or
        dead-letter, per the policy."""
        error = failure_text(error, retryable)
        return self._fail(item_id, tenant, worker, error, retryable, retry_instant(retry_at))

    def _fail(
        self,
        item_id: str,
        tenant: str,
        worker: str,
        error: str,
        retryable: bool,
        retry_at: float | None = None,
    ) -> WorkItem:
        """`fail` with ``error`` already mended and ``retry_at`` checked."""
        row = self._held(item_id, tenant, worker)
        settlement = self._policy.settle_failure(
            row["attempts"], retryable=retryable, now=self._clock.now(), retry_at=retry_at
        )
        settled = self._settle(row, settlement, error)
        assert settled is not None  # the fence was checked in this transaction
        return settled

    def _settle(self, row: sqlite3.Row, settlement: Settlement, error: str) -> WorkItem | None:
        failures = [*json.loads(row["failures"]), error]
        updated = self._tx.one(
            _SQL["settle_item"],
            {
                "seq": row["seq"],
                "worker": row["worker"],
                "lease_expires_at": row["lease_expires_at"],
                "dead": settlement.dead,
                "attempts": settlement.attempts,
                "available_at": settlement.available_at,
                "failures": json.dumps(failures),
            },
        )
        if updated is None:
            return None
        settled = _item(updated)
        if not settlement.dead:
            self._place(updated, self._clock.now())
            self._tx.work_added = True  # requeued: an idle worker may take it
        else:
            self._finished(settled)
        return settled

    def reap(self) -> list[WorkItem]:
        """Return every lapsed item to the queue, each fenced on the lease it saw; the
        items moved, as they now stand."""
        now = self._clock.now()
        reaped: list[WorkItem] = []
        for row in self._tx.all(_SQL["lapsed_leases"], {"now": now}):
            policy = self._policy.for_item(_payload(row))  # the item's own retries
            settlement = policy.settle_failure(row["attempts"], retryable=True, now=now)
            settled = self._settle(row, settlement, _REAPED_ERROR)
            if settled is not None:
                reaped.append(settled)
        per_queue = Counter(item.queue for item in reaped)
        for queue, count in per_queue.items():
            self._tx.execute(_SQL["count_reaped"], {"queue": queue, "count": count})
        self._tx.execute(_SQL["forget_dedupe_keys"], {"now": now, "limit": DEDUPE_SWEEP_BATCH})
        return reaped

    def adopt(self, *, worker: str) -> list[WorkItem]:
        """Give back at once everything ``worker`` holds, lapsed or not; the items moved."""
        now = self._clock.now()
        adopted: list[WorkItem] = []
        for row in self._tx.all(_SQL["held_by_worker"], {"worker": worker}):
            settlement = self._policy.for_item(_payload(row)).settle_failure(
                row["attempts"], retryable=True, now=now, immediate=True
            )
            settled = self._settle(row, settlement, _ADOPTED_ERROR)
            if settled is not None:
                adopted.append(settled)
        return adopted

    def dead_letters(
        self, *, tenant: str | None = None, limit: int = 50, queue: str | None = None
    ) -> list[WorkItem]:
        """Dead-lettered items of ``tenant`` (every tenant when None), oldest first."""
        rows = self._tx.all(
            _SQL["dead_letters"], {"tenant": tenant, "queue": queue, "limit": limit}
        )
        return [_item(row) for row in rows]

    def dead_letter_page(
        self, *, tenant: str | None, queue: str | None, limit: int, after: int | None
    ) -> DeadLetterPage:
        """A page of `dead_letters` after the item at ``after`` in enqueue order."""
        rows = self._tx.all(
            _SQL["dead_letter_page"],
            {"tenant": tenant, "queue": queue, "limit": limit, "after": after},
        )
        more = len(rows) > limit
        return DeadLetterPage(
            [_item(row) for row in rows[:limit]], str(rows[limit - 1]["seq"]) if more else None
        )

    def last_tick(self, name: str) -> float | None:
        """`SqliteWorkQueue.last_tick` inside this transaction."""
        found = self._tx.one(_SQL["get_tick"], {"name": name})
        return None if found is None else float(found[0])

    def advance_tick(self, name: str, tick: float) -> tuple[bool, float | None]:
        """`SqliteWorkQueue.advance_tick` inside this transaction."""
        found = self._tx.one(_SQL["get_tick"], {"name": name})
        previous = None if found is None else float(found[0])
        if previous is not None and previous >= tick:
            return False, None
        self._tx.execute(_SQL["set_tick"], {"name": name, "tick": tick})
        return True, previous

    def debounce(self, slot: str, workflow: str, args: str, due: float) -> str:
        """`SqliteWorkQueue.debounce` inside this transaction."""
        row = self._tx.one(
            _SQL["debounce"], {"slot": slot, "workflow": workflow, "args": args, "due": due}
        )
        assert row is not None  # the upsert returns its row
        return str(row[0])

    def begin_debounced(self, slot: str, workflow: str, now: float) -> Begun:
        """`SqliteWorkQueue.begin_debounced` inside this transaction."""
        named = {"slot": slot, "workflow": workflow}
        taken = self._tx.one(_SQL["begin_debounced"], {**named, "now": now})
        if taken is not None:
            return Begun(args=str(taken[0]))
        due = self._tx.one(_SQL["debounce_due"], named)
        return Begun() if due is None else Begun(due=float(due[0]))

    def release_debounced(self, slot: str, workflow: str) -> bool:
        """`SqliteWorkQueue.release_debounced` inside this transaction."""
        named = {"slot": slot, "workflow": workflow}
        return bool(self._tx.execute(_SQL["release_debounced"], named).rowcount)

    def debounced(self, slot: str) -> str | None:
        """`SqliteWorkQueue.debounced` inside this transaction."""
        row = self._tx.one(_SQL["debounced"], {"slot": slot})
        return None if row is None else str(row[0])

    def purge(self, *, queue: str, tenant: str | None = None) -> int:
        """Delete the queued items of ``queue`` (of ``tenant`` only, when given)."""
        rows = self._tx.all(_SQL["purge"], {"queue": queue, "tenant": tenant})
        for row in rows:
            self._tx.execute(
                _SQL["forget_purged_key"], {"tenant": row[0], "queue": queue, "id": row[1]}
            )
        return len(rows)

    def purge_dead_letters(self, queue: str, tenant: str | None, item_id: str | None) -> int:
        """Delete up to `DEAD_PURGE_BATCH` dead letters of ``queue`` (of ``tenant``, of the
        one ``item_id``, when given), with their dedupe keys."""
        rows = self._tx.all(
            _SQL["purge_dead_letters"],
            {"queue": queue, "tenant": tenant, "id": item_id, "limit": DEAD_PURGE_BATCH},
        )
        for row in rows:
            self._tx.execute(
                _SQL["forget_dead_key"], {"tenant": row[0], "queue": queue, "id": row[1]}
            )
        return len(rows)

    def finished_per_minute(self, names: list[str]) -> dict[str, list[Minute]]:
        """`SqliteWorkQueue.finished_per_minute` inside this transaction."""
        now = self._clock.now()
        found = {"names": json.dumps(names), "first": first_minute(now)}
        rows = self._tx.all(_SQL["finished_per_minute"], found)
        return rated([(r[0], r[1], r[2], r[3]) for r in rows], now)

    def queue_names(self, *, limit: int = QUEUE_NAMES_MOST) -> list[str]:
        """The queues that hold items or counters, sorted, at most ``limit``."""
        return [row[0] for row in self._tx.all(_SQL["queue_names"], {"limit": limit})]

    def stats(self, *, queue: str = DEFAULT_QUEUE) -> QueueStats:
        """Depth, claimed, dead-lettered, oldest due age and the cumulative counters."""
        now = self._clock.now()
        depth, claimed, dead, oldest, reaped, duplicates = self._tx.row(
            _SQL["stats"], {"queue": queue, "now": now}
        )
        return QueueStats(
            depth=depth or 0,
            claimed=claimed or 0,
            dead_lettered=dead or 0,
            oldest_age_seconds=0.0 if oldest is None else max(0.0, now - oldest),
            reaped=reaped or 0,
            duplicates_suppressed=duplicates or 0,
        )


_LIVE = frozenset(state.value for state in WorkState if not state.terminal)
_T = TypeVar("_T")
_QueueOp = Callable[[BoundSqliteWorkQueue], _T]


class SqliteWorkQueue:
    """A `WorkQueue` over a SQLite `Database`.

    Each operation, `claim` included, is one `BEGIN IMMEDIATE` transaction: the write lock
    makes it atomic across tasks and processes sharing the file. Delivery is
    at-least-once; handlers must be idempotent. `bound(tx)` joins a wider transaction.
    """

    def __init__(
        self,
        database: Database,
        *,
        clock: Clock | None = None,
        policy: QueuePolicy | None = None,
    ) -> None:
        self._db = database
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._policy = policy if policy is not None else QueuePolicy()
        self._max_bytes = database.settings.max_value_bytes

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the database is its owner's."""

    @property
    def policy(self) -> QueuePolicy:
        """The retry and lease policy this queue applies."""
        return self._policy

    @property
    def database(self) -> Database:
        """The database this queue lives in."""
        return self._db

    def bound(self, tx: Transaction) -> BoundSqliteWorkQueue:
        """This queue's operations inside the open transaction ``tx``."""
        return BoundSqliteWorkQueue(tx, self._clock, self._policy, self._max_bytes)

    async def _write(self, queue: str, operation: str, fn: _QueueOp[_T]) -> _T:
        try:
            return await self._db.transaction(lambda tx: fn(self.bound(tx)))
        except StatePersistenceError as exc:
            if exc.reason == "too_large":
                raise
            raise QueueUnavailableError(queue, operation, str(exc)) from exc

    async def enqueue(self, item: WorkItem, *, dedupe_ttl: float | None = None) -> WorkItem:
        """Queue ``item`` (idempotent on id and dedupe key while live, and on a dedupe key
        kept ``dedupe_ttl`` seconds after its item finished)."""
        # Refused before the transaction opens.
        payload = within_size(
            payload_text(checked_item(item).payload), self._max_bytes, "payload", "sqlite"
        )
        ttl = None if dedupe_ttl is None else dedupe_window(dedupe_ttl)
        return await self._write(item.queue, "enqueue", lambda q: q._enqueue(item, payload, ttl))

    async def enqueue_many(
        self, items: Sequence[WorkItem], *, dedupe_ttl: float | None = None
    ) -> list[WorkItem]:
        """`enqueue` of each of ``items`` in one transaction: all of them or none. Per item,
        in order, what `enqueue` would have answered; every item is checked first."""
        checked, texts = batch_items(items)
        ttl = None if dedupe_ttl is None else dedupe_window(dedupe_ttl)
        if not checked:
            return []
        payloads = [within_size(text, self._max_bytes, "payload", "sqlite") for text in texts]
        return await self._write(
            checked[0].queue,
            "enqueue",
            lambda q: [
                q._enqueue(item, payload, ttl)
                for item, payload in zip(checked, payloads, strict=True)
            ],
        )

    async def wait_for_work(self, queue: str = DEFAULT_QUEUE, within: float = 1.0) -> bool:
        """Wait up to ``within`` seconds for work that may be claimable; whether some came.

        An enqueue (or requeue) committed through this store's `Database` wakes the waiter
        at once; one committed by another process or connection is noticed within
        ``settings.watch_seconds`` (`Database.written_by_others`, a read of shared memory,
        so an idle waiter costs next to nothing). Any queue's work wakes it, and so can other
        writes by other processes: a wake is a hint to claim, never a promise. An item
        that only becomes due later is found by the caller's next poll.
        """
        identifier(queue, "queue")
        within = non_negative(within, "within")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        # The pulse is taken before looking, so no enqueue is missed; one task waits on it
        # for the whole wait (a task per look would cost more than the look).
        pulsed = asyncio.ensure_future(self._db.work_pulse().wait())
        try:
            mark = await self._db.write_mark()
            watch = self._db.settings.watch_seconds
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                await asyncio.wait((pulsed,), timeout=min(remaining, watch))
                if pulsed.done():
                    return True
                written, mark = await self._db.written_by_others(mark)
                if written:
                    return True
        finally:
            pulsed.cancel()

    async def claim(
        self, *, worker: str, queue: str = DEFAULT_QUEUE, lease_seconds: float | None = None
    ) -> WorkItem | None:
        """Atomically take one due item; None if nothing is due."""
        identifier(worker, "worker")
        identifier(queue, "queue")
        self._policy.lease_for(lease_seconds)
        return await self._write(
            queue,
            "claim",
            lambda q: q.claim(worker=worker, queue=queue, lease_seconds=lease_seconds),
        )

    async def claim_many(
        self,
        *,
        worker: str,
        queue: str = DEFAULT_QUEUE,
        lease_seconds: float | None = None,
        limit: int = 10,
    ) -> list[WorkItem]:
        """Up to ``limit`` due items in one transaction, each under its own lease, in the
        order that many single claims would take them (at most `BATCH_MOST`)."""
        identifier(worker, "worker")
        identifier(queue, "queue")
        self._policy.lease_for(lease_seconds)
        take = batch_limit(limit)
        return await self._write(
            queue,
            "claim",
            lambda q: q.claim_many(
                worker=worker, queue=queue, lease_seconds=lease_seconds, limit=take
            ),
        )

    async def heartbeat(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Extend the lease; `WorkItemNotFoundError` or `LeaseLostError` if not held."""
        _check_holding(item_id, tenant, worker)
        return await self._write(
            "*", "heartbeat", lambda q: q.heartbeat(item_id, tenant=tenant, worker=worker)
        )

    async def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Finish the item; fenced like `heartbeat`."""
        _check_holding(item_id, tenant, worker)
        return await self._write(
            "*", "complete", lambda q: q.complete(item_id, tenant=tenant, worker=worker)
        )

    async def complete_many(
        self, items: Sequence[tuple[str, str]], *, worker: str
    ) -> list[WorkItem | DurablyError]:
        """`complete` for each ``(item_id, tenant)`` in one transaction, each fenced on its
        own lease: per item, in order, the completed item or the error `complete` would
        have raised for it (`LeaseLostError`, `WorkItemNotFoundError`)."""
        keys = settle_keys(items, worker)
        if not keys:
            return []
        return await self._write("*", "complete", lambda q: q.complete_many(keys, worker=worker))

    async def fail(
        self,
        item_id: str,
        *,
        tenant: str,
        worker: str,
        error: str,
        retryable: bool = True,
        retry_at: float | None = None,
    ) -> WorkItem:
        """Record a failed attempt; requeued with backoff (at ``retry_at`` when given) or
        dead-lettered."""
        _check_holding(item_id, tenant, worker)
        error = failure_text(error, retryable)  # before the transaction opens; mended once
        at = retry_instant(retry_at)
        return await self._write(
            "*", "fail", lambda q: q._fail(item_id, tenant, worker, error, retryable, at)
        )

    async def reap(self) -> list[WorkItem]:
        """Return every lapsed item to the queue; the items moved, as they now stand."""
        return await self._write("*", "reap", lambda q: q.reap())

    async def adopt(self, *, worker: str) -> list[WorkItem]:
        """Give back at once everything ``worker`` holds; the items moved."""
        identifier(worker, "worker")
        return await self._write("*", "adopt", lambda q: q.adopt(worker=worker))

    async def dead_letters(
        self, *, tenant: str | None = None, limit: int = 50, queue: str | None = None
    ) -> list[WorkItem]:
        """Dead-lettered items of ``tenant`` (every tenant when None), oldest first."""
        if tenant is not None:
            identifier(tenant, "tenant")
        if queue is not None:
            identifier(queue, "queue")
        dead_letter_limit(limit)
        return await self._read(
            queue or "*",
            "dead_letters",
            lambda q: q.dead_letters(tenant=tenant, limit=limit, queue=queue),
        )

    async def dead_letter_page(
        self,
        *,
        tenant: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> DeadLetterPage:
        """A page of `dead_letters` after ``after`` (an item's place in enqueue order)."""
        since = sequence_cursor(dead_letter_query(tenant, queue, limit, after))
        return await self._read(
            queue or "*",
            "dead_letters",
            lambda q: q.dead_letter_page(tenant=tenant, queue=queue, limit=limit, after=since),
        )

    async def last_tick(self, name: str) -> float | None:
        """Schedule ``name``'s last fired tick (None: no mark yet). Raises
        `InvalidInputError` before any I/O."""
        name = identifier(name, "schedule")
        return await self._read("*", "last_tick", lambda q: q.last_tick(name))

    async def advance_tick(self, name: str, tick: float) -> tuple[bool, float | None]:
        """Move schedule ``name``'s last fired tick on to ``tick`` if it is later than the
        one kept, atomically across workers: whether this call moved it and, if it did,
        the tick kept before (None: this call took the first mark). Raises
        `InvalidInputError` before any I/O."""
        name, tick = tick_mark(name, tick)
        return await self._write("*", "advance_tick", lambda q: q.advance_tick(name, tick))

    async def debounce(self, slot: str, workflow: str, args: str, due: float) -> str:
        """Join debounce ``slot``'s pending workflow, giving it ``args`` and pushing it to
        ``due``, or (none pending) make the slot name ``workflow``: the pending workflow's
        id, in one write. Raises `InvalidInputError` before any I/O."""
        slot, workflow, args, due = debounce_call(slot, workflow, args, due)
        return await self._write("*", "debounce", lambda q: q.debounce(slot, workflow, args, due))

    async def begin_debounced(self, slot: str, workflow: str, now: float) -> Begun:
        """Let ``workflow`` take debounce ``slot`` if it is due at ``now`` (see `Begun`)."""
        slot, workflow, now = begin_call(slot, workflow, now)
        return await self._write(
            "*", "begin_debounced", lambda q: q.begin_debounced(slot, workflow, now)
        )

    async def release_debounced(self, slot: str, workflow: str) -> bool:
        """Delete debounce ``slot`` if it still names ``workflow`` (which began, or ended
        before it could): whether it did."""
        slot, workflow = release_call(slot, workflow)
        return await self._write(
            "*", "release_debounced", lambda q: q.release_debounced(slot, workflow)
        )

    async def debounced(self, slot: str) -> str | None:
        """The workflow debounce ``slot`` names, pending or begun (None: no slot)."""
        slot = slot_call(slot)
        return await self._read("*", "debounced", lambda q: q.debounced(slot))

    async def stats(self, *, queue: str = DEFAULT_QUEUE) -> QueueStats:
        """A snapshot of ``queue``."""
        identifier(queue, "queue")
        return await self._read(queue, "stats", lambda q: q.stats(queue=queue))

    async def purge(self, *, queue: str, tenant: str | None = None) -> int:
        """Delete every queued item of ``queue`` (of ``tenant`` only, when given), in one
        transaction; the number deleted."""
        identifier(queue, "queue")
        if tenant is not None:
            identifier(tenant, "tenant")
        return await self._write(queue, "purge", lambda q: q.purge(queue=queue, tenant=tenant))

    async def purge_dead_letters(
        self, *, queue: str, tenant: str | None = None, item_id: str | None = None
    ) -> int:
        """Delete dead letters of ``queue``: the one ``item_id`` of ``tenant``, every one of
        ``tenant``, or every tenant's, with the dedupe keys they keep, a batch a
        transaction; the number deleted."""
        dead_letter_target(queue, tenant, item_id)
        return await in_batches(
            lambda: self._write(
                queue, "purge", lambda q: q.purge_dead_letters(queue, tenant, item_id)
            )
        )

    async def finished_per_minute(self, *, queues: Sequence[str]) -> dict[str, list[Minute]]:
        """Items of each of ``queues`` completed and dead-lettered in each of the last
        minutes, oldest first (`SLOTS` rows a queue)."""
        names = rated_queues(queues)
        return await self._read("*", "stats", lambda q: q.finished_per_minute(names))

    async def queue_names(self, *, limit: int = QUEUE_NAMES_MOST) -> list[str]:
        """The queues that hold items or counters, sorted, at most ``limit``."""
        names_limit(limit)
        return await self._read("*", "queue_names", lambda q: q.queue_names(limit=limit))

    async def _read(self, queue: str, operation: str, fn: _QueueOp[_T]) -> _T:
        try:
            return await self._db.transaction(lambda tx: fn(self.bound(tx)), write=False)
        except StatePersistenceError as exc:
            raise QueueUnavailableError(queue, operation, str(exc)) from exc


def _check_holding(item_id: str, tenant: str, worker: str) -> None:
    identifier(item_id, "item_id")
    identifier(tenant, "tenant")
    identifier(worker, "worker")


__all__ = ["BoundSqliteWorkQueue", "SqliteWorkQueue"]
