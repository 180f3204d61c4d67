"""A work queue in process memory, applying `QueuePolicy` and the fairness order of
`durably.work` exactly as the datastore backings do. A claim reads the rotation index
(`durably.memory.rotation`), not every item."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from durably.clock import Clock, SystemClock
from durably.errors import DurablyError, LeaseLostError, WorkItemNotFoundError
from durably.memory.rotation import Rotation
from durably.stores.debounce import Begun, begin_call, debounce_call, release_call, slot_call
from durably.stores.flow import throttle_admits
from durably.stores.throughput import Minute, Ring, rated_queues
from durably.stores.work import (
    DEDUPE_SWEEP_BATCH,
    DEFAULT_QUEUE,
    QUEUE_NAMES_MOST,
    DeadLetterPage,
    QueuePolicy,
    QueueStats,
    Settlement,
    WorkItem,
    WorkState,
    batch_items,
    batch_limit,
    checked_item,
    dead_letter_query,
    dead_letter_target,
    dedupe_window,
    failure_text,
    names_limit,
    payload_text,
    queued_copy,
    retry_instant,
    sequence_cursor,
    settle_keys,
    tick_mark,
)
from durably.validation import identifier

_Key = tuple[str, str]  # (tenant, item id)

_LEASE_EXPIRED = "lease expired"
_ADOPTED = "adopted after restart"


@dataclass(slots=True)
class _Slot:
    sequence: int  # enqueue order; breaks exact ties in the fairness order
    queue: str
    text: str = ""
    state: WorkState | None = None  # as in ``text``, kept for the counters (None: unsaved)

    def item(self) -> WorkItem:
        return WorkItem.model_validate_json(self.text)


@dataclass(slots=True)
class _Tables:
    items: dict[_Key, _Slot] = field(default_factory=dict)
    # (tenant, queue, dedupe_key) -> id of the live item holding it
    dedupe: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # queue -> its queued items and tenants in the order claims take them
    rotations: dict[str, Rotation[int]] = field(default_factory=dict)
    # items held by a worker, in no order (what reap and adopt look through)
    claimed: set[_Key] = field(default_factory=set)
    sizes: Counter[tuple[str, WorkState]] = field(default_factory=Counter)
    reaped: Counter[str] = field(default_factory=Counter)
    duplicates: Counter[str] = field(default_factory=Counter)
    sequence: int = 0
    # (tenant, id) -> how long its dedupe key outlasts it (only items enqueued with one)
    ttls: dict[_Key, float] = field(default_factory=dict)
    # (tenant, queue, dedupe_key) -> (expiry, the finished item as JSON): keys kept after
    # their item finished, and a heap of (expiry, key) that `reap` sweeps them by
    kept: dict[tuple[str, str, str], tuple[float, str]] = field(default_factory=dict)
    expiries: list[tuple[float, tuple[str, str, str]]] = field(default_factory=list)
    # Flow control: the gates of queued and claimed items under it, the claimed items of
    # each (queue, concurrency key), and each (queue, throttle key)'s arrival time.
    gates: dict[_Key, _Gate] = field(default_factory=dict)
    running: Counter[tuple[str, str]] = field(default_factory=Counter)
    arrivals: dict[tuple[str, str], float] = field(default_factory=dict)
    ticks: dict[str, float] = field(default_factory=dict)  # schedule -> last fired tick
    debounces: dict[str, _Pending] = field(default_factory=dict)  # debounce slot -> its state
    finished: Ring = field(default_factory=Ring)  # items finished per minute, by queue


@dataclass(slots=True)
class _Pending:
    """A debounce slot: its pending (or begun) workflow, the last arguments, when due."""

    workflow: str
    args: str
    due: float
    begun: bool = False


@dataclass(frozen=True, slots=True)
class _Gate:
    concurrency_key: str | None
    concurrency_limit: int
    throttle_key: str | None
    throttle_seconds: float
    throttle_burst: int

    @classmethod
    def of(cls, item: WorkItem) -> _Gate | None:
        if item.concurrency_key is None and item.throttle_key is None:
            return None
        return cls(
            item.concurrency_key,
            item.concurrency_limit or 1,
            item.throttle_key,
            item.throttle_seconds or 1.0,
            item.throttle_burst or 1,
        )


class MemoryWorkQueue:
    """A `WorkQueue` over dicts, driven by the injected clock.

    No operation awaits between its read and its write, so each is atomic with respect to
    other asyncio tasks. Items are kept as JSON text like a real store.
    """

    def __init__(self, clock: Clock | None = None, policy: QueuePolicy | None = None) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._policy = policy if policy is not None else QueuePolicy()
        self._tables = _Tables()

    async def close(self) -> None:
        """Nothing to release (idempotent): everything lives in this object."""

    @property
    def policy(self) -> QueuePolicy:
        """The retry and lease policy this queue applies."""
        return self._policy

    async def enqueue(self, item: WorkItem, *, dedupe_ttl: float | None = None) -> WorkItem:
        """Queue ``item`` (a future ``available_at`` delays it). A live item with the same
        id or the same (tenant, queue, dedupe_key) is returned unchanged instead, and so
        is a finished one whose key is kept (``dedupe_ttl``)."""
        checked_item(item)
        payload_text(item.payload)  # what every other backing refuses, refused here too
        return self._enqueue(item, None if dedupe_ttl is None else dedupe_window(dedupe_ttl))

    def _enqueue(self, item: WorkItem, ttl: float | None) -> WorkItem:
        tenant, item_id, queue = item.tenant, item.id, item.queue
        live = self._live(tenant, item_id)
        if live is None and item.dedupe_key is not None:
            holder = self._tables.dedupe.get((tenant, queue, item.dedupe_key))
            live = None if holder is None else self._live(tenant, holder)
            if live is None:
                live = self._kept(tenant, queue, item.dedupe_key)
        if live is not None:
            self._tables.duplicates[live.queue] += 1
            return live
        previous = self._tables.items.get((tenant, item_id))
        if previous is not None:  # terminal: the new item replaces it
            self._forget_dedupe(previous.item())
            if previous.state is not None:
                self._tables.sizes[(previous.queue, previous.state)] -= 1
        now = self._clock.now()
        queued = queued_copy(item, now)
        self._tables.sequence += 1
        self._tables.items[(tenant, item_id)] = _Slot(self._tables.sequence, queue)
        self._save(queued)
        if queued.dedupe_key is not None:
            self._tables.dedupe[(tenant, queue, queued.dedupe_key)] = item_id
            if ttl is not None:
                self._tables.ttls[(tenant, item_id)] = ttl
        return queued

    async def enqueue_many(
        self, items: Sequence[WorkItem], *, dedupe_ttl: float | None = None
    ) -> list[WorkItem]:
        """`enqueue` of each of ``items``, in order, as one step (nothing else runs between
        them); every item is checked before any is queued."""
        ttl = None if dedupe_ttl is None else dedupe_window(dedupe_ttl)
        return [self._enqueue(item, ttl) for item in batch_items(items)[0]]

    async def claim(
        self, *, worker: str, queue: str = DEFAULT_QUEUE, lease_seconds: float | None = None
    ) -> WorkItem | None:
        """Take one due item of ``queue``: tenants in rotation, then priority, then age."""
        identifier(worker, "worker")
        identifier(queue, "queue")
        lease = self._policy.lease_for(lease_seconds)
        now = self._clock.now()
        rotation = self._tables.rotations.get(queue)
        gates = self._tables.gates
        if rotation is None:
            return None
        taken = rotation.take(
            now, (lambda tenant: self._admits(queue, tenant, now)) if gates else None
        )
        if taken is None:
            return None
        gate = gates.get(taken)
        if gate is not None and gate.throttle_key is not None:
            arrivals = self._tables.arrivals
            key = (queue, gate.throttle_key)
            tat = throttle_admits(
                arrivals.get(key), now, gate.throttle_seconds, gate.throttle_burst
            )
            assert tat is not None  # `_admits` let it through at this instant
            arrivals[key] = tat
        chosen = self._tables.items[taken].item()
        claimed = chosen.model_copy(
            update={
                "state": WorkState.CLAIMED,
                "worker": worker,
                "claimed_at": now,
                "first_claimed_at": now
                if chosen.first_claimed_at is None
                else chosen.first_claimed_at,
                "lease_expires_at": now + lease,
            }
        )
        self._save(claimed)
        return claimed

    async def claim_many(
        self,
        *,
        worker: str,
        queue: str = DEFAULT_QUEUE,
        lease_seconds: float | None = None,
        limit: int = 10,
    ) -> list[WorkItem]:
        """Up to ``limit`` claims at once, each item under its own lease, in the order that
        many single claims would take them (at most `BATCH_MOST`)."""
        identifier(worker, "worker")
        identifier(queue, "queue")
        self._policy.lease_for(lease_seconds)
        taken: list[WorkItem] = []
        for _ in range(batch_limit(limit)):
            item = await self.claim(worker=worker, queue=queue, lease_seconds=lease_seconds)
            if item is None:
                break
            taken.append(item)
        return taken

    async def heartbeat(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Extend the caller's lease by the policy's ``lease_seconds`` (never past
        ``max_lease_seconds`` since the claim). Raises `WorkItemNotFoundError` or
        `LeaseLostError` (``"taken"``, ``"capped"`` or ``"expired"``)."""
        item = self._held(item_id, tenant, worker, heartbeat=True)
        assert item.claimed_at is not None
        cap = item.claimed_at + self._policy.max_lease_seconds
        now = self._clock.now()
        extended = item.model_copy(
            update={"lease_expires_at": min(now + self._policy.lease_seconds, cap)}
        )
        self._save(extended)
        return extended

    async def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        """Finish the item; fenced like `heartbeat`."""
        item = self._held(item_id, tenant, worker)
        done = item.model_copy(update={"state": WorkState.COMPLETED, "lease_expires_at": None})
        self._save(done)
        self._forget_dedupe(done, finished=True)
        return done

    async def complete_many(
        self, items: Sequence[tuple[str, str]], *, worker: str
    ) -> list[WorkItem | DurablyError]:
        """`complete` for each ``(item_id, tenant)``, each fenced on its own lease: per
        item, in order, the completed item or the error `complete` would have raised."""
        results: list[WorkItem | DurablyError] = []
        for item_id, tenant in settle_keys(items, worker):
            try:
                results.append(await self.complete(item_id, tenant=tenant, worker=worker))
            except (LeaseLostError, WorkItemNotFoundError) as lost:
                results.append(lost)
        return results

    async def complete_and_claim(
        self,
        items: Sequence[tuple[str, str]],
        *,
        worker: str,
        queue: str = DEFAULT_QUEUE,
        limit: int,
        lease_seconds: float | None = None,
    ) -> tuple[list[WorkItem | DurablyError], list[WorkItem]]:
        """`complete_many` of ``items``, then `claim_many` of up to ``limit`` items of
        ``queue``, as one step; every argument is checked before anything changes."""
        pairs = settle_keys(items, worker)
        identifier(queue, "queue")
        self._policy.lease_for(lease_seconds)
        batch_limit(limit)
        done = await self.complete_many(pairs, worker=worker)
        taken = await self.claim_many(
            worker=worker, queue=queue, lease_seconds=lease_seconds, limit=limit
        )
        return done, taken

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
        """Record a failed attempt: requeue with backoff (at ``retry_at`` when given) or
        dead-letter, per the policy."""
        error = failure_text(error, retryable)
        at = retry_instant(retry_at)
        item = self._held(item_id, tenant, worker)
        settlement = self._policy.settle_failure(
            item.attempts, retryable=retryable, now=self._clock.now(), retry_at=at
        )
        return self._settle(item, settlement, error)

    async def reap(self) -> list[WorkItem]:
        """Return every claimed item whose lease lapsed (attempt counted, backoff applied);
        the items moved, as they now stand. Forgets kept dedupe keys whose time is up."""
        now = self._clock.now()
        self._sweep_kept(now)
        reaped: list[WorkItem] = []
        for item in self._claimed_items():
            lapsed = item.lease_expires_at is not None and item.lease_expires_at <= now
            if lapsed:
                policy = self._policy.for_item(item.payload)  # the item's own retries
                settlement = policy.settle_failure(item.attempts, retryable=True, now=now)
                reaped.append(self._settle(item, settlement, _LEASE_EXPIRED))
                self._tables.reaped[item.queue] += 1
        return reaped

    async def adopt(self, *, worker: str) -> list[WorkItem]:
        """Give back at once everything ``worker`` holds, lapsed or not (attempt counted);
        the items moved, as they now stand."""
        identifier(worker, "worker")
        now = self._clock.now()
        adopted: list[WorkItem] = []
        for item in self._claimed_items():
            if item.worker == worker:
                settlement = self._policy.for_item(item.payload).settle_failure(
                    item.attempts, retryable=True, now=now, immediate=True
                )
                adopted.append(self._settle(item, settlement, _ADOPTED))
        return adopted

    async def dead_letters(
        self, *, tenant: str | None = None, limit: int = 50, queue: str | None = None
    ) -> list[WorkItem]:
        """Dead-lettered items of ``tenant`` (every tenant when None; optionally of one
        queue), oldest first."""
        page = await self.dead_letter_page(tenant=tenant, queue=queue, limit=limit)
        return page.items

    async def dead_letter_page(
        self,
        *,
        tenant: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> DeadLetterPage:
        """A page of `dead_letters` after ``after`` (each item's place in enqueue order)."""
        since = sequence_cursor(dead_letter_query(tenant, queue, limit, after))
        dead = sorted(
            (
                (slot.sequence, item)
                for (owner, _), slot in self._tables.items.items()
                if (tenant is None or owner == tenant)
                and (since is None or slot.sequence > since)
                and (item := slot.item()).state is WorkState.DEAD_LETTERED
                and (queue is None or item.queue == queue)
            ),
            key=lambda pair: pair[0],
        )
        more = len(dead) > limit
        return DeadLetterPage(
            [item for _, item in dead[:limit]], str(dead[limit - 1][0]) if more else None
        )

    async def last_tick(self, name: str) -> float | None:
        """Schedule ``name``'s last fired tick (None: no mark yet). Raises
        `InvalidInputError` before any I/O."""
        return self._tables.ticks.get(identifier(name, "schedule"))

    async def advance_tick(self, name: str, tick: float) -> tuple[bool, float | None]:
        """Move schedule ``name``'s last fired tick on to ``tick`` if it is later than the
        one kept, atomically across workers: whether this call moved it and, if it did,
        the tick kept before (None: this call took the first mark). Raises
        `InvalidInputError` before any I/O."""
        name, tick = tick_mark(name, tick)
        previous = self._tables.ticks.get(name)
        if previous is not None and previous >= tick:
            return False, None
        self._tables.ticks[name] = tick
        return True, previous

    async def debounce(self, slot: str, workflow: str, args: str, due: float) -> str:
        """Join debounce ``slot``'s pending workflow, giving it ``args`` and pushing it to
        ``due``, or (none pending) make the slot name ``workflow``: the pending workflow's
        id. Raises `InvalidInputError` before any I/O."""
        slot, workflow, args, due = debounce_call(slot, workflow, args, due)
        held = self._tables.debounces.get(slot)
        if held is not None and not held.begun:
            held.args, held.due = args, due
            return held.workflow
        self._tables.debounces[slot] = _Pending(workflow, args, due)
        return workflow

    async def begin_debounced(self, slot: str, workflow: str, now: float) -> Begun:
        """Let ``workflow`` take debounce ``slot`` if it is due at ``now`` (see `Begun`)."""
        slot, workflow, now = begin_call(slot, workflow, now)
        held = self._tables.debounces.get(slot)
        if held is None or held.workflow != workflow:
            return Begun()
        if not held.begun and held.due > now:
            return Begun(due=held.due)
        held.begun = True
        return Begun(args=held.args)

    async def release_debounced(self, slot: str, workflow: str) -> bool:
        """Delete debounce ``slot`` if it still names ``workflow`` (which began, or ended
        before it could): whether it did."""
        slot, workflow = release_call(slot, workflow)
        held = self._tables.debounces.get(slot)
        if held is None or held.workflow != workflow:
            return False
        del self._tables.debounces[slot]
        return True

    async def debounced(self, slot: str) -> str | None:
        """The workflow debounce ``slot`` names, pending or begun (None: no slot)."""
        held = self._tables.debounces.get(slot_call(slot))
        return None if held is None else held.workflow

    async def stats(self, *, queue: str = DEFAULT_QUEUE) -> QueueStats:
        """Depth, claimed, dead-lettered, oldest due age and cumulative counters."""
        identifier(queue, "queue")
        rotation = self._tables.rotations.get(queue)
        now = self._clock.now()
        oldest = None if rotation is None else rotation.oldest(now)
        sizes = self._tables.sizes
        return QueueStats(
            depth=sizes[(queue, WorkState.QUEUED)],
            claimed=sizes[(queue, WorkState.CLAIMED)],
            dead_lettered=sizes[(queue, WorkState.DEAD_LETTERED)],
            oldest_age_seconds=0.0 if oldest is None else now - oldest,
            reaped=self._tables.reaped[queue],
            duplicates_suppressed=self._tables.duplicates[queue],
        )

    async def purge(self, *, queue: str, tenant: str | None = None) -> int:
        """Delete every queued item of ``queue`` (of ``tenant`` only, when given); the
        number deleted."""
        identifier(queue, "queue")
        if tenant is not None:
            identifier(tenant, "tenant")
        tables = self._tables
        rotation = tables.rotations.get(queue)
        now = self._clock.now()
        doomed = [
            key
            for key, slot in tables.items.items()
            if slot.queue == queue
            and slot.state is WorkState.QUEUED
            and (tenant is None or key[0] == tenant)
        ]
        for key in doomed:
            item = tables.items[key].item()
            if rotation is not None:
                rotation.discard(item.tenant, item.id, now)
            tables.sizes[(queue, WorkState.QUEUED)] -= 1
            self._forget_dedupe(item)
            tables.gates.pop(key, None)
            del tables.items[key]
        return len(doomed)

    async def purge_dead_letters(
        self, *, queue: str, tenant: str | None = None, item_id: str | None = None
    ) -> int:
        """Delete dead letters of ``queue``: the one ``item_id`` of ``tenant``, every one of
        ``tenant``, or every tenant's, with the dedupe keys they keep; the number deleted."""
        dead_letter_target(queue, tenant, item_id)
        tables = self._tables
        doomed = [
            key
            for key, slot in tables.items.items()
            if slot.queue == queue
            and slot.state is WorkState.DEAD_LETTERED
            and (tenant is None or key[0] == tenant)
            and (item_id is None or key[1] == item_id)
        ]
        for key in doomed:
            item = tables.items[key].item()
            tables.sizes[(queue, WorkState.DEAD_LETTERED)] -= 1
            kept = (item.tenant, queue, item.dedupe_key or "")
            held = tables.kept.get(kept)
            if held is not None and WorkItem.model_validate_json(held[1]).id == item.id:
                del tables.kept[kept]
            self._forget_dedupe(item)
            tables.gates.pop(key, None)
            del tables.items[key]
        return len(doomed)

    async def finished_per_minute(self, *, queues: Sequence[str]) -> dict[str, list[Minute]]:
        """Items of each of ``queues`` completed and dead-lettered in each of the last
        minutes, oldest first."""
        names = rated_queues(queues)
        return self._tables.finished.read(names, self._clock.now())

    async def queue_names(self, *, limit: int = QUEUE_NAMES_MOST) -> list[str]:
        """The queues that hold items or counters, sorted, at most ``limit``."""
        names_limit(limit)
        tables = self._tables
        names = {queue for (queue, _), count in tables.sizes.items() if count > 0}
        names.update(queue for queue, count in tables.reaped.items() if count)
        names.update(queue for queue, count in tables.duplicates.items() if count)
        return sorted(names)[:limit]

    # --- internals ------------------------------------------------------------------------

    def _admits(self, queue: str, tenant: str, now: float) -> Callable[[str], bool]:
        """Whether each item (by id) of ``tenant`` passes its flow gates at ``now``."""
        gates, running, arrivals = self._tables.gates, self._tables.running, self._tables.arrivals

        def admits(item_id: str) -> bool:
            gate = gates.get((tenant, item_id))
            if gate is None:
                return True
            key = gate.concurrency_key
            if key is not None and running[(queue, key)] >= gate.concurrency_limit:
                return False
            if gate.throttle_key is None:
                return True
            tat = arrivals.get((queue, gate.throttle_key))
            return throttle_admits(tat, now, gate.throttle_seconds, gate.throttle_burst) is not None

        return admits

    def _live(self, tenant: str, item_id: str) -> WorkItem | None:
        slot = self._tables.items.get((tenant, item_id))
        if slot is None:
            return None
        item = slot.item()
        return None if item.state.terminal else item

    def _held(self, item_id: str, tenant: str, worker: str, *, heartbeat: bool = False) -> WorkItem:
        """The item if ``worker`` still holds its lease, else the reason it does not."""
        identifier(item_id, "item_id")
        identifier(tenant, "tenant")
        identifier(worker, "worker")
        slot = self._tables.items.get((tenant, item_id))
        if slot is None:
            raise WorkItemNotFoundError(item_id, tenant)
        item = slot.item()
        if item.state is WorkState.COMPLETED:  # kept only for reading: it is gone
            raise WorkItemNotFoundError(item_id, tenant)
        if item.state is not WorkState.CLAIMED or item.worker != worker:
            holder = item.worker if item.state is WorkState.CLAIMED else None
            raise LeaseLostError(item_id, worker, holder, "taken")
        now = self._clock.now()
        assert item.claimed_at is not None
        assert item.lease_expires_at is not None
        # Checked before expiry: a lease never outlives the cap, so past the cap it has
        # always expired too, and "capped" is the reason the caller can act on.
        if heartbeat and now - item.claimed_at >= self._policy.max_lease_seconds:
            raise LeaseLostError(item_id, worker, worker, "capped")
        if item.lease_expires_at <= now:
            raise LeaseLostError(item_id, worker, worker, "expired")
        return item

    def _settle(self, item: WorkItem, settlement: Settlement, error: str) -> WorkItem:
        common = {
            "attempts": settlement.attempts,
            "failures": (*item.failures, error),
            "worker": None,
            "lease_expires_at": None,
            "claimed_at": None,
        }
        if settlement.dead:
            settled = item.model_copy(update={**common, "state": WorkState.DEAD_LETTERED})
            self._forget_dedupe(settled, finished=True)
        else:
            settled = item.model_copy(
                update={
                    **common,
                    "state": WorkState.QUEUED,
                    "available_at": settlement.available_at,
                }
            )
        self._save(settled)
        return settled

    def _claimed_items(self) -> list[WorkItem]:
        """Every claimed item, in enqueue order (the order SQLite's reap reads them in)."""
        items = self._tables.items
        slots = sorted((items[key] for key in self._tables.claimed), key=lambda s: s.sequence)
        return [slot.item() for slot in slots]

    def _save(self, item: WorkItem) -> None:
        """Store ``item`` and keep the counters, the claimed set and the rotation index in
        step with its state (a claim has already taken it out of the index)."""
        tables = self._tables
        key = (item.tenant, item.id)
        slot = tables.items[key]
        slot.text = item.model_dump_json()
        previous, state = slot.state, item.state
        slot.state = state
        if previous is state and state is not WorkState.QUEUED:
            return
        if previous is not None:
            tables.sizes[(slot.queue, previous)] -= 1
        tables.sizes[(slot.queue, state)] += 1
        if previous is WorkState.CLAIMED and state.terminal:
            failed = state is WorkState.DEAD_LETTERED
            tables.finished.count(slot.queue, self._clock.now(), failed=failed)
        gate = tables.gates.get(key) if previous is not None else _Gate.of(item)
        if state is WorkState.CLAIMED:
            tables.claimed.add(key)
        elif previous is WorkState.CLAIMED:
            tables.claimed.discard(key)
        if gate is not None:
            self._gate(key, slot.queue, gate, previous, state)
        rotation = tables.rotations.get(slot.queue)
        if rotation is None:
            rotation = tables.rotations[slot.queue] = Rotation[int]()
        if state is WorkState.QUEUED:
            assert item.available_at is not None  # a queued item always has one
            rotation.add(
                item.tenant,
                item.id,
                priority=int(item.priority),
                available_at=item.available_at,
                sequence=slot.sequence,
                now=self._clock.now(),
            )
        elif previous is WorkState.QUEUED:
            rotation.discard(item.tenant, item.id, self._clock.now())

    def _gate(
        self,
        key: _Key,
        queue: str,
        gate: _Gate,
        previous: WorkState | None,
        state: WorkState,
    ) -> None:
        """Keep the gates and the running counts in step with a change of state."""
        tables = self._tables
        if state.terminal:
            tables.gates.pop(key, None)
        else:
            tables.gates[key] = gate
        if gate.concurrency_key is None:
            return
        counted = (queue, gate.concurrency_key)
        if state is WorkState.CLAIMED:
            tables.running[counted] += 1
        elif previous is WorkState.CLAIMED:
            tables.running[counted] -= 1
            if tables.running[counted] <= 0:
                del tables.running[counted]

    def _forget_dedupe(self, item: WorkItem, *, finished: bool = False) -> None:
        """Free ``item``'s dedupe key; when it has just ``finished`` and was enqueued with
        a ``dedupe_ttl``, keep the key that long with the finished item."""
        ttl = self._tables.ttls.pop((item.tenant, item.id), None)
        if item.dedupe_key is None:
            return
        key = (item.tenant, item.queue, item.dedupe_key)
        if self._tables.dedupe.get(key) != item.id:
            return
        del self._tables.dedupe[key]
        if finished and ttl is not None:
            expiry = self._clock.now() + ttl
            self._tables.kept[key] = (expiry, item.model_dump_json())
            heapq.heappush(self._tables.expiries, (expiry, key))

    def _kept(self, tenant: str, queue: str, dedupe_key: str) -> WorkItem | None:
        """The finished item whose key is still kept, if any."""
        kept = self._tables.kept.get((tenant, queue, dedupe_key))
        if kept is None or kept[0] <= self._clock.now():
            return None
        return WorkItem.model_validate_json(kept[1])

    def _sweep_kept(self, now: float) -> None:
        """Forget up to `DEDUPE_SWEEP_BATCH` kept keys whose time is up, by the heap."""
        tables = self._tables
        for _ in range(DEDUPE_SWEEP_BATCH):
            if not tables.expiries or tables.expiries[0][0] > now:
                return
            expiry, key = heapq.heappop(tables.expiries)
            kept = tables.kept.get(key)
            if kept is not None and kept[0] == expiry:
                del tables.kept[key]


__all__ = ["MemoryWorkQueue"]
