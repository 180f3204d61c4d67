"""`PostgresWorkQueue`: work items in one table, claimed with ``FOR UPDATE SKIP LOCKED``,
tenants served in rotation through a rotation table, every settle fenced on the lease."""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Sequence
from typing import Any, Self

from durably.clock import Clock, SystemClock
from durably.errors import (
    DurablyError,
    LeaseLostError,
    StatePersistenceError,
    WorkItemNotFoundError,
)
from durably.postgres import statements
from durably.postgres.connection import Access
from durably.postgres.executor import Row, Session
from durably.postgres.failures import RetryBudget, queue_errors
from durably.postgres.migrate import verify
from durably.postgres.notify import Listener
from durably.postgres.schema import StateTables
from durably.postgres.settings import PostgresStoreSettings
from durably.stores.debounce import Begun, begin_call, debounce_call, release_call, slot_call
from durably.stores.settings import DEFAULT_MAX_VALUE_BYTES
from durably.stores.throughput import Minute, first_minute, rated, rated_queues
from durably.stores.work import (
    DEAD_PURGE_BATCH,
    DEDUPE_SWEEP_BATCH,
    DEFAULT_QUEUE,
    QUEUE_NAMES_MOST,
    DeadLetterPage,
    QueuePolicy,
    QueueStats,
    WorkItem,
    WorkPriority,
    WorkState,
    batch_items,
    checked_item,
    dead_letter_limit,
    dead_letter_query,
    dead_letter_target,
    dedupe_window,
    failure_text,
    in_batches,
    names_limit,
    payload_text,
    queued_copy,
    retry_instant,
    sequence_cursor,
    settle_keys,
    stored_item,
    tick_mark,
)
from durably.validation import identifier, non_negative, positive_int, within_size

_TEMPLATES = statements.load("queue.sql")
_BATCH = 500
CLAIM_MOST = 1000
"""The most items one `PostgresWorkQueue.claim_many` takes (queue.sql's claim relies on it)."""
_CHORE_ROUNDS = 8  # claims a call may run after tidying: each clears up to 32 + take entries
_WALK_PAST = 32  # entries a claim's walk reads beyond the due tenants it needs (queue.sql)
_BEYOND = 8  # due tenants a claim reads beyond those it takes from, for SKIP LOCKED to pass
STATS_EXACT_UP_TO = 1000
"""`stats` counts each state exactly up to this many items, and estimates above it."""
ENQUEUE_TOKEN_SECONDS = 600.0
"""How long an enqueue's token is kept for a retry of that call to find: far beyond any
retry budget; `reap` forgets older tokens."""
# Enum members by stored value: a dict lookup is cheaper than the enum call per row.
_PRIORITIES = {int(member): member for member in WorkPriority}
_STATES = {member.value: member for member in WorkState}


class PostgresWorkQueue:
    """Work items in PostgreSQL (`durably.stores.WorkQueue`).

    ``bound(connection)`` gives a queue that runs inside the caller's open transaction, so
    a run and the work it queues commit together. ``wait_for_work`` wakes on NOTIFY.
    """

    def __init__(
        self,
        pool: Any,
        *,
        clock: Clock | None = None,
        policy: QueuePolicy | None = None,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._policy = policy or QueuePolicy()
        self._tables = tables or StateTables()
        self._max_bytes = settings.max_value_bytes if settings else DEFAULT_MAX_VALUE_BYTES
        self._poll_seconds = settings.poll_seconds if settings else 1.0
        self._access = Access.over(
            pool, settings.retry if settings else RetryBudget(), clock=self._clock
        )
        self._sql = statements.render_all(_TEMPLATES, self._tables.names)
        self._channel = self._tables.channel("work")
        self._listener = Listener(self._access.database, [self._channel])

    @classmethod
    async def open(
        cls,
        pool: Any,
        *,
        clock: Clock | None = None,
        policy: QueuePolicy | None = None,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
    ) -> Self:
        """A queue after `verify` accepted the database (`ConfigurationError` otherwise)."""
        await verify(pool, tables, durable=settings.durable if settings else True)
        return cls(pool, clock=clock, policy=policy, settings=settings, tables=tables)

    @property
    def policy(self) -> QueuePolicy:
        return self._policy

    @property
    def listener(self) -> Listener:
        """The LISTEN connection behind `wait_for_work` (started on first wait)."""
        return self._listener

    def bound(self, connection: Any) -> PostgresWorkQueue:
        """This queue inside ``connection``'s open transaction; it retries nothing."""
        twin = object.__new__(PostgresWorkQueue)
        twin.__dict__.update(self.__dict__)
        twin._access = self._access.bound(connection)
        return twin

    async def close(self) -> None:
        """Stop the listening connection (the pool is the caller's)."""
        await self._listener.close()

    # --- enqueue and claim ------------------------------------------------------------------

    async def enqueue(self, item: WorkItem, *, dedupe_ttl: float | None = None) -> WorkItem:
        checked_item(item)
        ttl = None if dedupe_ttl is None else dedupe_window(dedupe_ttl)
        now = self._clock.now()
        available_at = item.available_at if item.available_at is not None else now
        payload = within_size(payload_text(item.payload), self._max_bytes, "payload", "postgres")
        statement = self._sql["enqueue"]
        args: tuple[object, ...] = (
            item.tenant,
            item.id,
            item.queue,
            payload,
            int(item.priority),
            now,
            available_at,
            self._channel,
            secrets.token_hex(8),  # a retry of this call finds the item it wrote by it
        )
        if (
            item.dedupe_key is not None
            or item.attempts
            or item.failures
            or item.concurrency_key is not None
            or item.throttle_key is not None
        ):
            statement = self._sql["enqueue_carrying"]
            args = (
                *args,
                item.dedupe_key,
                item.attempts,
                json.dumps(list(item.failures)),
                ttl,
                *_flow_args(item),
            )
        duplicate = await self._access.run(
            self._insert, item, statement, args, errors=queue_errors(item.queue, "enqueue")
        )
        if duplicate is not None:
            return duplicate
        return queued_copy(item, now)

    async def enqueue_many(
        self, items: Sequence[WorkItem], *, dedupe_ttl: float | None = None
    ) -> list[WorkItem]:
        """`enqueue` of each of ``items`` in one statement and one transaction: all of them
        or none. Per item, in order, what `enqueue` would have answered. An item the
        statement could not write (its id or dedupe key held, or given twice) is settled
        as `enqueue` settles it, in the same transaction."""
        checked, texts = batch_items(items)
        ttl = None if dedupe_ttl is None else dedupe_window(dedupe_ttl)
        if not checked:
            return []
        now = self._clock.now()
        payloads = [within_size(text, self._max_bytes, "payload", "postgres") for text in texts]
        tokens = [secrets.token_hex(8) for _ in checked]
        columns = (
            [item.tenant for item in checked],
            [item.id for item in checked],
            [item.queue for item in checked],
            payloads,
            [int(item.priority) for item in checked],
            now,
            [now if item.available_at is None else item.available_at for item in checked],
            self._channel,
            tokens,
            [item.dedupe_key for item in checked],
            [item.attempts for item in checked],
            [json.dumps(list(item.failures)) for item in checked],
            ttl,
            [item.concurrency_key for item in checked],
            [item.concurrency_limit for item in checked],
            [item.throttle_key for item in checked],
            [item.throttle_seconds for item in checked],
            [item.throttle_burst for item in checked],
        )

        async def write(session: Session) -> list[WorkItem]:
            rows = await session.fetch(self._sql["enqueue_many"], *columns)
            written = {(row[0], row[1]) for row in rows}
            answers: list[WorkItem] = []
            for item, payload, token in zip(checked, payloads, tokens, strict=True):
                key = (item.tenant, item.id)
                if key in written:
                    written.discard(key)  # an id given again after is a duplicate of it
                    answers.append(queued_copy(item, now))
                    continue
                args = self._enqueue_args(item, payload, now, token, ttl)
                statement = self._sql["enqueue_carrying"]
                duplicate = await self._insert(session, item, statement, args)
                answers.append(queued_copy(item, now) if duplicate is None else duplicate)
            return answers

        answers: list[WorkItem] = await self._access.run(
            write, errors=queue_errors(checked[0].queue, "enqueue"), transaction=True
        )
        return answers

    def _enqueue_args(
        self, item: WorkItem, payload: str, now: float, token: str, ttl: float | None
    ) -> tuple[object, ...]:
        """The arguments of `enqueue_carrying` for ``item``."""
        return (
            item.tenant,
            item.id,
            item.queue,
            payload,
            int(item.priority),
            now,
            item.available_at if item.available_at is not None else now,
            self._channel,
            token,
            item.dedupe_key,
            item.attempts,
            json.dumps(list(item.failures)),
            ttl,
            *_flow_args(item),
        )

    async def _insert(
        self, session: Session, item: WorkItem, statement: str, args: tuple[object, ...]
    ) -> WorkItem | None:
        """Insert the item (None), or the live item holding its id or dedupe key."""
        for _ in range(5):
            if await session.count(statement, *args):
                return None
            if await session.fetch(self._sql["enqueued_by"], args[8]):
                return None  # this call wrote the item before its answer was lost
            # A live item holding the id or the dedupe key is the answer, and then nothing
            # is freed: a dead letter under the same id stays (and stays dead).
            found = await session.fetch(
                self._sql["find_live"], item.tenant, item.id, item.queue, item.dedupe_key
            )
            if found:
                live = _item(found[0])
                # Counted where the live item is: the queue whose stats show it.
                await session.fetch(self._sql["count_duplicate"], live.queue)
                return live
            if item.dedupe_key is not None:
                kept = await session.fetch(
                    self._sql["find_kept"], item.tenant, item.queue, item.dedupe_key, args[5]
                )
                if kept:  # its key outlasts a finished item: that item is the answer
                    await session.fetch(self._sql["count_duplicate"], item.queue)
                    return _kept_item(json.loads(kept[0][0]))
            if await session.fetch(self._sql["drop_terminal"], item.tenant, item.id):
                continue  # a finished item held the id: it is freed, insert again
        raise StatePersistenceError("postgres", "contended", "enqueue kept racing")

    async def claim(
        self, *, worker: str, queue: str = DEFAULT_QUEUE, lease_seconds: float | None = None
    ) -> WorkItem | None:
        """Atomically take one due item: tenants in rotation, then priority, then age."""
        items = await self.claim_many(
            worker=worker, queue=queue, lease_seconds=lease_seconds, limit=1
        )
        return items[0] if items else None

    async def claim_many(
        self,
        *,
        worker: str,
        queue: str = DEFAULT_QUEUE,
        lease_seconds: float | None = None,
        limit: int = 10,
    ) -> list[WorkItem]:
        """Take up to ``limit`` due items in one statement, each under its own lease, as
        ``limit`` claims would (a batch may take several items of the first tenant). One
        call takes at most `CLAIM_MOST` (1000) items, whatever ``limit`` asks."""
        identifier(worker, "worker")
        identifier(queue, "queue")
        lease = self._policy.lease_for(lease_seconds)
        take = min(positive_int(limit, "limit"), CLAIM_MOST)
        now = self._clock.now()
        beyond = _BEYOND
        items, chores, promote, more = await self._claim(
            queue, now, worker, lease, take, True, beyond
        )
        for _ in range(_CHORE_ROUNDS):
            if not chores and not promote and not more:
                break
            await self._chores(queue, now, chores, promote)
            if len(items) >= take:
                break
            if not promote and not more and len(chores) <= _WALK_PAST:
                break  # the walk ended at the rotation's end, not at its cap: nothing more
            if more:
                beyond = min(beyond * 8, CLAIM_MOST)  # other claims held what it read
            taken, chores, promote, more = await self._claim(
                queue, now, worker, lease, take - len(items), False, beyond
            )
            items.extend(taken)
        return items

    async def _claim(
        self,
        queue: str,
        now: float,
        worker: str,
        lease: float,
        take: int,
        defer: bool,
        beyond: int,
    ) -> tuple[list[WorkItem], list[str], bool, bool]:
        """One claim statement: the items taken, the tenants it found with nothing due
        (for `_chores`), whether it deferred to waiting tenants that came due, and whether
        it came back short after reading as many due tenants as it was allowed."""
        rows = await self._access.run(
            lambda s: s.fetch(self._sql["claim"], queue, now, worker, lease, take, defer, beyond),
            errors=queue_errors(queue, "claim"),
        )
        items: list[WorkItem] = []
        chores: list[str] = []
        promote = more = False
        for row in rows:
            if row[1] is not None:
                items.append(_item(row))
            elif row[7] == "promote":
                promote = True
            elif row[7] == "more":
                more = True
            else:
                chores.append(row[0])
        return items, chores, promote, more

    async def _chores(self, queue: str, now: float, tenants: list[str], promote: bool) -> None:
        """Promote the waiting tenants that came due, and take the ``tenants`` a claim found
        with nothing due out of the rotation (queue.sql's `tidy`, in a transaction of its
        own: its check must read after its locks). Inside a caller's transaction the tidy
        is left to the next pooled claim, since that transaction may read one snapshot."""
        if promote:
            await self._run(lambda s: s.count(self._sql["promote"], queue, now), "claim", queue)
        if not tenants or self._access.bound_session is not None:
            return

        async def tidy(session: Session) -> None:
            rows = await session.fetch(self._sql["tidy_lock"], queue, tenants)
            if rows:
                await session.fetch(self._sql["tidy"], queue, now, [row[0] for row in rows])

        await self._access.run(tidy, errors=queue_errors(queue, "claim"), transaction=True)

    async def wait_for_work(self, queue: str = DEFAULT_QUEUE, within: float = 1.0) -> bool:
        """Wait up to ``within`` seconds for work in ``queue``: True at once if an item is
        due, True when an enqueue (or requeue) is notified, False after the wait.

        Wakes within milliseconds of the enqueue's commit; polls every ``poll_seconds``
        as the fallback while the listening connection is down.
        """
        identifier(queue, "queue")
        non_negative(within, "within")
        event = await self._listener.armed(self._channel, min(within, 1.0))
        now = self._clock.now()
        rows = await self._run(
            lambda s: s.fetch(self._sql["next_due"], queue), "wait_for_work", queue
        )
        next_due = rows[0][0] if rows else None
        if next_due is not None and float(next_due) <= now:
            return True
        wait = min(within, self._poll_seconds)
        if next_due is not None:
            wait = min(wait, float(next_due) - now)
        return await Listener.wait(event, wait)

    # --- settling -------------------------------------------------------------------------

    async def heartbeat(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        identifier(item_id, "item_id")
        identifier(tenant, "tenant")
        identifier(worker, "worker")
        now = self._clock.now()
        policy = self._policy
        rows = await self._fetch(
            "heartbeat",
            item_id,
            tenant,
            worker,
            now,
            policy.lease_seconds,
            policy.max_lease_seconds,
        )
        if rows:
            return _item(rows[0])
        raise await self._lost(item_id, tenant, worker, now, "heartbeat")

    async def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        identifier(item_id, "item_id")
        identifier(tenant, "tenant")
        identifier(worker, "worker")
        now = self._clock.now()
        rows = await self._fetch("complete", item_id, tenant, worker, now)
        if rows:
            return _item(rows[0])
        raise await self._lost(item_id, tenant, worker, now, "complete")

    async def complete_many(
        self, items: Sequence[tuple[str, str]], *, worker: str
    ) -> list[WorkItem | DurablyError]:
        """`complete` for each ``(item_id, tenant)`` in one statement, each fenced on its
        own lease: per item, in order, the completed item or the error `complete` would
        have raised for it (`LeaseLostError`, `WorkItemNotFoundError`)."""
        keys = settle_keys(items, worker)
        if not keys:
            return []
        now = self._clock.now()
        tenants = [tenant for _, tenant in keys]
        ids = [item_id for item_id, _ in keys]
        rows = await self._run(
            lambda s: s.fetch(self._sql["complete_many"], tenants, ids, worker, now),
            "complete",
            DEFAULT_QUEUE,
        )
        done = {(item.id, item.tenant): item for item in map(_item, rows)}
        results: list[WorkItem | DurablyError] = []
        for item_id, tenant in keys:
            found = done.pop((item_id, tenant), None)
            if found is None:
                results.append(await self._lost(item_id, tenant, worker, now, "complete"))
            else:
                results.append(found)
        return results

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
        identifier(item_id, "item_id")
        identifier(tenant, "tenant")
        identifier(worker, "worker")
        error = failure_text(error, retryable)
        at = retry_instant(retry_at)
        now = self._clock.now()
        rows = await self._run(
            lambda s: s.fetch(self._sql["get_item"], tenant, item_id), "fail", DEFAULT_QUEUE
        )
        seen = _item(rows[0]) if rows else None
        if (
            seen is None
            or seen.state != WorkState.CLAIMED
            or seen.worker != worker
            or seen.lease_expires_at is None
            or seen.lease_expires_at <= now
        ):
            raise await self._lost(item_id, tenant, worker, now, "fail")
        settled = await self._settle(seen, error=error, retryable=retryable, now=now, retry_at=at)
        if settled is None:
            raise await self._lost(item_id, tenant, worker, now, "fail")
        return settled

    async def reap(self) -> list[WorkItem]:
        now = self._clock.now()
        lapsed = await self._run(
            lambda s: s.fetch(self._sql["lapsed"], now, _BATCH), "reap", DEFAULT_QUEUE
        )
        reaped: list[WorkItem] = []
        for row in lapsed:
            settled = await self._settle(
                _item(row), error="lease expired", retryable=True, now=now, lapsed=True
            )
            if settled is not None:
                reaped.append(settled)
        for queue, count in Counter(item.queue for item in reaped).items():
            await self._run(
                lambda s, q=queue, n=count: s.fetch(self._sql["count_reaped"], q, n), "reap", queue
            )
        await self._run(
            lambda s: s.count(self._sql["forget_enqueues"], now - ENQUEUE_TOKEN_SECONDS, _BATCH),
            "reap",
            DEFAULT_QUEUE,
        )
        await self._run(
            lambda s: s.count(self._sql["forget_dedupe_keys"], now, DEDUPE_SWEEP_BATCH),
            "reap",
            DEFAULT_QUEUE,
        )
        return reaped

    async def adopt(self, *, worker: str) -> list[WorkItem]:
        identifier(worker, "worker")
        now = self._clock.now()
        held = await self._run(
            lambda s: s.fetch(self._sql["held_by"], worker, _BATCH * 20), "adopt", DEFAULT_QUEUE
        )
        adopted: list[WorkItem] = []
        for row in held:
            settled = await self._settle(
                _item(row),
                error="adopted after restart",
                retryable=True,
                now=now,
                immediate=True,
                lapsed=True,
            )
            if settled is not None:
                adopted.append(settled)
        return adopted

    async def dead_letters(
        self, *, tenant: str | None = None, limit: int = 50, queue: str | None = None
    ) -> list[WorkItem]:
        """Dead-lettered items of ``tenant`` (every tenant when None), oldest first."""
        if tenant is not None:
            identifier(tenant, "tenant")
        if queue is not None:
            identifier(queue, "queue")
        dead_letter_limit(limit)
        rows = await self._run(
            lambda s: s.fetch(self._sql["dead_letters"], tenant, queue, limit),
            "dead_letters",
            queue or DEFAULT_QUEUE,
        )
        return [_item(row) for row in rows]

    async def debounce(self, slot: str, workflow: str, args: str, due: float) -> str:
        """Join debounce ``slot``'s pending workflow, giving it ``args`` and pushing it to
        ``due``, or (none pending) make the slot name ``workflow``: the pending workflow's
        id, in one statement. Raises `InvalidInputError` before any I/O."""
        slot, workflow, args, due = debounce_call(slot, workflow, args, due)
        rows = await self._run(
            lambda s: s.fetch(self._sql["debounce"], slot, workflow, args, due), "debounce", "*"
        )
        return str(rows[0][0])

    async def begin_debounced(self, slot: str, workflow: str, now: float) -> Begun:
        """Let ``workflow`` take debounce ``slot`` if it is due at ``now`` (see `Begun`)."""
        slot, workflow, now = begin_call(slot, workflow, now)
        rows = await self._run(
            lambda s: s.fetch(self._sql["begin_debounced"], slot, workflow, now),
            "begin_debounced",
            "*",
        )
        args, due = rows[0][0], rows[0][1]
        if args is not None:
            return Begun(args=str(args))
        return Begun() if due is None else Begun(due=float(due))

    async def release_debounced(self, slot: str, workflow: str) -> bool:
        """Delete debounce ``slot`` if it still names ``workflow`` (which began, or ended
        before it could): whether it did."""
        slot, workflow = release_call(slot, workflow)
        rows = await self._run(
            lambda s: s.fetch(self._sql["release_debounced"], slot, workflow),
            "release_debounced",
            "*",
        )
        return bool(rows)

    async def debounced(self, slot: str) -> str | None:
        """The workflow debounce ``slot`` names, pending or begun (None: no slot)."""
        slot = slot_call(slot)
        rows = await self._run(lambda s: s.fetch(self._sql["debounced"], slot), "debounced", "*")
        return str(rows[0][0]) if rows else None

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
        rows = await self._run(
            lambda s: s.fetch(self._sql["dead_letter_page"], tenant, queue, limit, since),
            "dead_letters",
            queue or DEFAULT_QUEUE,
        )
        more = len(rows) > limit
        return DeadLetterPage(
            [_item(tuple(row)[:-1]) for row in rows[:limit]],
            str(rows[limit - 1][-1]) if more else None,
        )

    async def last_tick(self, name: str) -> float | None:
        """Schedule ``name``'s last fired tick (None: no mark yet). Raises
        `InvalidInputError` before any I/O."""
        name = identifier(name, "schedule")
        rows = await self._run(lambda s: s.fetch(self._sql["last_tick"], name), "last_tick", "*")
        return float(rows[0][0]) if rows else None

    async def advance_tick(self, name: str, tick: float) -> tuple[bool, float | None]:
        """Move schedule ``name``'s last fired tick on to ``tick`` if it is later than the
        one kept, atomically across workers: whether this call moved it and, if it did,
        the tick kept before (None: this call took the first mark). Raises
        `InvalidInputError` before any I/O."""
        name, tick = tick_mark(name, tick)
        rows = await self._run(
            lambda s: s.fetch(self._sql["advance_tick"], name, tick), "advance_tick", "*"
        )
        if not rows:
            return False, None
        previous = rows[0][0]
        return True, None if previous is None else float(previous)

    async def stats(self, *, queue: str = DEFAULT_QUEUE) -> QueueStats:
        """A snapshot read in bounded time at any size: each count is exact below
        `STATS_EXACT_UP_TO` items; a count that reaches it is the planner's estimate (never
        below the cap). The oldest age, ``reaped`` and ``duplicates_suppressed`` are exact."""
        identifier(queue, "queue")
        now = self._clock.now()

        async def read(session: Session) -> list[Any]:
            row = list((await session.fetch(self._sql["stats"], queue, now, STATS_EXACT_UP_TO))[0])
            for position, state in enumerate(("queued", "claimed", "dead_lettered")):
                if row[position] >= STATS_EXACT_UP_TO:
                    row[position] = await self._estimate(session, queue, state)
            return row

        depth, claimed, dead, oldest, reaped, duplicates = await self._run(read, "stats", queue)
        return QueueStats(
            depth=int(depth),
            claimed=int(claimed),
            dead_lettered=int(dead),
            oldest_age_seconds=max(0.0, now - float(oldest)) if oldest is not None else 0.0,
            reaped=int(reaped or 0),
            duplicates_suppressed=int(duplicates or 0),
        )

    async def purge(self, *, queue: str, tenant: str | None = None) -> int:
        """Delete every queued item of ``queue`` (of ``tenant`` only, when given), in one
        statement; the number deleted."""
        identifier(queue, "queue")
        if tenant is not None:
            identifier(tenant, "tenant")
        rows = await self._run(lambda s: s.fetch(self._sql["purge"], queue, tenant), "purge", queue)
        return int(rows[0][0])

    async def purge_dead_letters(
        self, *, queue: str, tenant: str | None = None, item_id: str | None = None
    ) -> int:
        """Delete dead letters of ``queue``: the one ``item_id`` of ``tenant``, every one of
        ``tenant``, or every tenant's, with the dedupe keys they keep, a batch a
        statement; the number deleted."""
        dead_letter_target(queue, tenant, item_id)
        sql = self._sql["purge_dead_letters"]

        async def batch() -> int:
            rows = await self._run(
                lambda s: s.fetch(sql, queue, tenant, item_id, DEAD_PURGE_BATCH), "purge", queue
            )
            return int(rows[0][0])

        return await in_batches(batch)

    async def finished_per_minute(self, *, queues: Sequence[str]) -> dict[str, list[Minute]]:
        """Items of each of ``queues`` completed and dead-lettered in each of the last
        minutes, oldest first (`SLOTS` times `SHARDS` rows a queue at most)."""
        names = rated_queues(queues)
        now = self._clock.now()
        rows = await self._run(
            lambda s: s.fetch(self._sql["finished_per_minute"], names, first_minute(now)),
            "stats",
            DEFAULT_QUEUE,
        )
        return rated([(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows], now)

    async def queue_names(self, *, limit: int = QUEUE_NAMES_MOST) -> list[str]:
        """The queues that hold items or counters, sorted, at most ``limit``."""
        names_limit(limit)
        rows = await self._run(
            lambda s: s.fetch(self._sql["queue_names"], limit), "queue_names", DEFAULT_QUEUE
        )
        return [row[0] for row in rows]

    async def _estimate(self, session: Session, queue: str, state: str) -> int:
        """The planner's row estimate for ``state``'s items in ``queue``, at least the cap."""
        plan = (await session.fetch(self._sql["stats_estimate"], queue, state))[0][0]
        if isinstance(plan, str):
            plan = json.loads(plan)
        return max(STATS_EXACT_UP_TO, int(plan[0]["Plan"]["Plan Rows"]))

    # --- internals ------------------------------------------------------------------------

    async def _settle(
        self,
        item: WorkItem,
        *,
        error: str,
        retryable: bool,
        now: float,
        immediate: bool = False,
        retry_at: float | None = None,
        lapsed: bool = False,
    ) -> WorkItem | None:
        # A lapse or a hold given back (no word from the handler) follows the item's own
        # retries; a handler's failure is settled as it says.
        policy = self._policy.for_item(item.payload) if lapsed else self._policy
        settlement = policy.settle_failure(
            item.attempts, retryable=retryable, now=now, immediate=immediate, retry_at=retry_at
        )
        rows = await self._run(
            lambda s: s.fetch(
                self._sql["settle"],
                item.tenant,
                item.id,
                item.worker,
                item.lease_expires_at,
                settlement.attempts,
                settlement.dead,
                settlement.available_at,
                error,
                self._channel,
                now,
            ),
            "settle",
            item.queue,
        )
        return _item(rows[0][:20]) if rows else None

    async def _fetch(self, name: str, item_id: str, tenant: str, *args: Any) -> Sequence[Row]:
        rows: Sequence[Row] = await self._run(
            lambda s: s.fetch(self._sql[name], tenant, item_id, *args), name, DEFAULT_QUEUE
        )
        return rows

    async def _run(self, operation: Any, name: str, queue: str) -> Any:
        return await self._access.run(operation, errors=queue_errors(queue, name))

    async def _lost(
        self, item_id: str, tenant: str, worker: str, now: float, operation: str
    ) -> DurablyError:
        rows = await self._run(
            lambda s: s.fetch(self._sql["get_item"], tenant, item_id), operation, DEFAULT_QUEUE
        )
        item = _item(rows[0]) if rows else None
        if item is None or item.state == WorkState.COMPLETED:  # a completed item is gone
            return WorkItemNotFoundError(item_id, tenant)
        if item.state != WorkState.CLAIMED:
            return LeaseLostError(item_id, worker, None, "taken")
        if item.worker != worker:
            return LeaseLostError(item_id, worker, item.worker, "taken")
        claimed_at = item.claimed_at if item.claimed_at is not None else now
        if operation == "heartbeat" and now - claimed_at >= self._policy.max_lease_seconds:
            return LeaseLostError(item_id, worker, worker, "capped")
        if item.lease_expires_at is None or item.lease_expires_at <= now:
            return LeaseLostError(item_id, worker, worker, "expired")
        # The holding changed between the write and this read: report the race as lost.
        return LeaseLostError(item_id, worker, item.worker, "taken")


def _item(row: Row) -> WorkItem:
    """A row this store wrote, as a `WorkItem` without re-validation: every value was
    checked by `enqueue` or computed by the statements, and this is the hot path."""
    (
        tenant,
        item_id,
        queue,
        payload,
        priority,
        dedupe_key,
        attempts,
        stored_state,
        worker,
        enqueued_at,
        available_at,
        lease_expires_at,
        first_claimed_at,
        claimed_at,
        failures,
        concurrency_key,
        concurrency_limit,
        throttle_key,
        throttle_seconds,
        throttle_burst,
    ) = row
    return stored_item(
        {
            "id": item_id,
            "tenant": tenant,
            "queue": queue,
            "payload": json.loads(payload) if payload != "{}" else {},
            "priority": _PRIORITIES.get(priority) or WorkPriority(priority),
            "dedupe_key": dedupe_key,
            "attempts": attempts,
            "state": _STATES.get(stored_state) or WorkState(stored_state),
            "worker": worker,
            "enqueued_at": enqueued_at,
            "available_at": available_at,
            "lease_expires_at": lease_expires_at,
            "first_claimed_at": first_claimed_at,
            "claimed_at": claimed_at,
            "failures": tuple(json.loads(failures)) if failures != "[]" else (),
            "concurrency_key": concurrency_key,
            "concurrency_limit": concurrency_limit,
            "throttle_key": throttle_key,
            "throttle_seconds": throttle_seconds,
            "throttle_burst": throttle_burst,
        }
    )


def _flow_args(item: WorkItem) -> tuple[object, ...]:
    """The flow gate arguments of `enqueue_carrying` ($14 to $18) for ``item``."""
    return (
        item.concurrency_key,
        item.concurrency_limit,
        item.throttle_key,
        item.throttle_seconds,
        item.throttle_burst,
    )


_ITEM_COLUMNS = 20


def _kept_item(row: list[object]) -> WorkItem:
    """A finished item kept with its dedupe key (a JSON array of its row). A row kept
    before items had flow gates lacks their columns: they read as none."""
    return _item(tuple(row) + (None,) * (_ITEM_COLUMNS - len(row)))


__all__ = ["CLAIM_MOST", "PostgresWorkQueue"]
