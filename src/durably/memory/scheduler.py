"""The in-memory `Scheduler`: one entry per workflow in a dict, hand-outs on an event.

Ready workflows wait in the rotation index the memory work queue uses (`Rotation`), one
line per tenant, so a hand-out serves tenants in turn (the fairness order in
durably.stores.workflows) at O(log n) in workflows and tenants. Hand-outs in flight wait
apart in a heap by when their lease lapses, sleeping entries in a heap by due time. Heap
rows are never updated in place: a change pushes a new row, and a row whose entry has
moved on since is dropped when it reaches the top; the heaps are rebuilt when stale rows
outnumber live ones.

Every method but `next_ready`'s wait finishes without yielding to the event loop, so each
is atomic under asyncio. Hand-out leases run on ``time.monotonic()`` (the store's clock);
sleeping entries are due on the caller's clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from durably.memory.rotation import Rotation
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

_Row = tuple[float, str, int, "_Entry"]  # time, workflow, push number, entry


@dataclass(slots=True)
class _Entry:
    tenant: str
    ready: bool
    visible_at: float  # store clock; meaningful while ready
    due: float  # caller's clock; meaningful while sleeping
    receipt: str | None = None  # set while a hand-out is in flight
    taken_at: float = 0.0
    priority: int = DEFAULT_PRIORITY


def _kept(entry: _Entry, tenant: str | None, priority: int | None, now: float) -> bool:
    """Whether making ``entry`` ready in ``tenant``'s line at ``priority`` (None: the one it
    has) leaves it as it is: it is queued so already, and visible (it keeps its place)."""
    return (
        entry.ready
        and entry.receipt is None
        and entry.visible_at <= now
        and tenant in (None, entry.tenant)
        and priority in (None, entry.priority)
    )


class MemoryScheduler:
    """A `Scheduler` held in this process.

    ``lease`` is how long a delivery stays invisible; ``namespace`` names the workflow kind
    this scheduler serves; ``now`` is the store clock (``time.monotonic`` unless a test
    injects another).
    """

    def __init__(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        lease: float = DEFAULT_LEASE,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lease = positive(lease, "lease")
        self._namespace = identifier(namespace, "namespace")
        self._now = now
        self._entries: dict[str, _Entry] = {}
        # Ready workflows with no hand-out in flight, by tenant in turn (ties: workflow id).
        self._rotation = Rotation[str](ages=False)
        # Rows of the hand-outs in flight by when their lease lapses, sleeping ones by due.
        self._leased: list[_Row] = []
        self._sleeping: list[_Row] = []
        self._pushes = itertools.count()
        self._changed = asyncio.Event()
        self._changed_on: asyncio.AbstractEventLoop | None = None
        self._receipts = itertools.count(1)
        self._instance = uuid.uuid4().hex

    async def close(self) -> None:
        """Nothing to release (idempotent): everything lives in this object."""

    @property
    def lease(self) -> float:
        """Seconds a delivery stays invisible to other takers."""
        return self._lease

    @property
    def namespace(self) -> str:
        """The workflow kind this scheduler serves."""
        return self._namespace

    async def prepare(self) -> None:
        """Nothing to set up in memory."""

    async def make_ready(
        self, workflow: str, *, tenant: str | None = None, priority: int | None = None
    ) -> None:
        """Make the workflow runnable now in ``tenant``'s turn at ``priority`` (None: the
        tenant and priority it has); a delivery in flight no longer answers it."""
        self._make_ready_now(workflow, tenant, priority)

    async def make_ready_many(self, entries: Sequence[Ready]) -> None:
        """`make_ready` each entry, at once."""
        for entry in ready_batch(entries):
            self._make_ready_now(entry.workflow, entry.tenant, entry.priority)

    async def cancel_many(self, workflows: Sequence[str]) -> None:
        """`cancel` each workflow, at once."""
        for workflow in workflow_batch(workflows):
            self._cancel_now(workflow)

    async def wake_at(self, delivery: Delivery, when: float) -> None:
        """Answer ``delivery`` and sleep the workflow until ``when`` (caller's clock),
        never pushing out a wakeup that arrived meanwhile."""
        identifier(delivery.workflow, "workflow")
        finite(when, "when")
        entry = self._entries.get(delivery.workflow)
        if entry is None:
            return
        if entry.receipt == delivery.receipt:
            entry.ready = False
            entry.due = when
            entry.receipt = None
            self._push(self._sleeping, when, delivery.workflow, entry)
        elif not entry.ready and when < entry.due:
            entry.due = when
            self._push(self._sleeping, when, delivery.workflow, entry)

    async def reprioritize(self, workflow: str, priority: int) -> bool:
        """Serve the workflow's entry at ``priority`` from now on, its visibility kept;
        False when it has none."""
        identifier(workflow, "workflow")
        rank = new_priority(priority)
        entry = self._entries.get(workflow)
        if entry is None:
            return False
        entry.priority = rank
        if entry.ready and entry.receipt is None:  # in its tenant's line: placed again
            self._queue(workflow, entry, entry.visible_at, self._now())
        return True

    async def wake_due(self, now: float) -> int:
        """Make every sleeping entry due at or before ``now`` ready; the count woken."""
        finite(now, "now")
        store_now = self._now()
        woken = 0
        sleeping = self._sleeping
        while sleeping and sleeping[0][0] <= now:
            due, workflow, _, entry = heapq.heappop(sleeping)
            if self._asleep(due, workflow, entry):
                entry.ready = True
                self._queue(workflow, entry, store_now, store_now)
                woken += 1
        if woken:
            self._notify()
        return woken

    async def next_ready(self, within: float) -> Delivery | None:
        """Take a ready workflow in the fairness order, waiting up to ``within`` seconds."""
        non_negative(within, "within")
        deadline = self._now() + within
        while True:
            changed = self._waitable()
            now = self._now()
            taken = self._take(now)
            if taken is not None:
                return taken
            remaining = deadline - now
            if remaining <= 0:
                return None
            # Also wake when a hand-out's lease lapses, not only on a change (`_take` left
            # the earliest live row on top).
            upcoming = self._leased[0][0] - now if self._leased else remaining
            wait = min(remaining, upcoming)
            try:
                await asyncio.wait_for(changed.wait(), timeout=wait)
            except TimeoutError:
                pass

    async def reclaim(self, idle: float) -> list[str]:
        """Make deliveries taken at least ``idle`` seconds ago visible now (0 = all); the
        workflows reclaimed."""
        non_negative(idle, "idle")
        now = self._now()
        reclaimed: list[str] = []
        for workflow, entry in self._entries.items():
            if entry.receipt is not None and now - entry.taken_at >= idle:
                self._queue(workflow, entry, now, now)
                reclaimed.append(workflow)
        if reclaimed:
            self._notify()
        return reclaimed

    async def extend(self, delivery: Delivery, within: float) -> bool:
        """Keep ``delivery`` invisible for ``within`` more seconds; False if not held."""
        identifier(delivery.workflow, "workflow")
        positive(within, "within")
        entry = self._entries.get(delivery.workflow)
        if entry is None or entry.receipt != delivery.receipt:
            return False
        entry.visible_at = self._now() + within
        self._push(self._leased, entry.visible_at, delivery.workflow, entry)
        return True

    async def cancel(self, workflow: str) -> None:
        """Remove the workflow's queued, sleeping or in-flight entry."""
        self._cancel_now(workflow)

    async def done(self, delivery: Delivery) -> None:
        """Answer ``delivery``; a wakeup that arrived meanwhile stays."""
        identifier(delivery.workflow, "workflow")
        entry = self._entries.get(delivery.workflow)
        if entry is not None and entry.receipt == delivery.receipt:
            del self._entries[delivery.workflow]

    # --- synchronous steps, shared with MemoryDurable so it never awaits between writes ---

    def _make_ready_now(
        self, workflow: str, tenant: str | None = None, priority: int | None = None
    ) -> None:
        identifier(workflow, "workflow")
        if tenant is not None:
            identifier(tenant, "tenant")
        rank = ready_priority(priority)
        now = self._now()
        entry = self._entries.get(workflow)
        if entry is None:
            entry = _Entry(tenant or DEFAULT_TENANT, ready=True, visible_at=now, due=now)
            self._entries[workflow] = entry
        elif _kept(entry, tenant, rank, now):
            self._notify()
            return
        else:
            if tenant is not None and tenant != entry.tenant:
                self._rotation.discard(entry.tenant, workflow, now)
                entry.tenant = tenant
            entry.ready = True
        if rank is not None:
            entry.priority = rank  # its line's old row is stale once `_queue` re-adds it
        self._queue(workflow, entry, now, now)
        self._notify()

    def _cancel_now(self, workflow: str) -> None:
        identifier(workflow, "workflow")
        entry = self._entries.pop(workflow, None)
        if entry is not None:
            self._rotation.discard(entry.tenant, workflow, self._now())

    # --- internals -------------------------------------------------------------------------

    def _queue(self, workflow: str, entry: _Entry, visible_at: float, now: float) -> None:
        """Put a ready ``entry`` in its tenant's line, visible since ``visible_at``, any
        hand-out forgotten."""
        entry.receipt = None
        entry.visible_at = visible_at
        self._rotation.add(
            entry.tenant,
            workflow,
            priority=entry.priority,
            available_at=visible_at,
            sequence=workflow,
            now=now,
        )

    def _take(self, now: float) -> Delivery | None:
        leased = self._leased
        lapsed = 0
        # Hand-outs whose lease lapsed rejoin their tenant's line first, so they are served
        # in the tenant's turn (at most LAPSED_PER_TAKE a take, as every backing does).
        while leased and lapsed < LAPSED_PER_TAKE:
            at, workflow, _, entry = leased[0]
            if not self._leased_now(at, workflow, entry):
                heapq.heappop(leased)
                continue
            if at > now:
                break
            heapq.heappop(leased)
            self._queue(workflow, entry, at, now)
            lapsed += 1
        taken = self._rotation.take(now)
        if taken is None:
            return None
        workflow = taken[1]
        entry = self._entries[workflow]
        entry.receipt = f"{self._instance}:{next(self._receipts)}"
        entry.taken_at = now
        entry.visible_at = now + self._lease
        self._push(leased, entry.visible_at, workflow, entry)
        return Delivery(workflow, entry.receipt)

    def _leased_now(self, at: float, workflow: str, entry: _Entry) -> bool:
        """Whether a row of the in-flight heap still stands for its entry."""
        return (
            entry.receipt is not None
            and entry.visible_at == at
            and self._entries.get(workflow) is entry
        )

    def _asleep(self, due: float, workflow: str, entry: _Entry) -> bool:
        """Whether a row of the sleeping heap still stands for its entry."""
        return not entry.ready and entry.due == due and self._entries.get(workflow) is entry

    def _push(self, heap: list[_Row], at: float, workflow: str, entry: _Entry) -> None:
        heapq.heappush(heap, (at, workflow, next(self._pushes), entry))
        if len(heap) > 2 * len(self._entries) + 64:
            # Mostly stale rows: keep the live ones (each entry's newest), rebuilt in place.
            live = self._leased_now if heap is self._leased else self._asleep
            kept = {row[1]: row for row in heap if live(row[0], row[1], row[3])}
            heap[:] = list(kept.values())
            heapq.heapify(heap)

    def _waitable(self) -> asyncio.Event:
        """The event a waiter of this loop waits on: an event serves one event loop, and
        this scheduler may outlive the loop that last waited (one ``asyncio.run`` after
        another)."""
        loop = asyncio.get_running_loop()
        if self._changed_on is not loop:
            self._changed, self._changed_on = asyncio.Event(), loop
        return self._changed

    def _notify(self) -> None:
        # Wake every waiter, then give later waiters a fresh event to wait on. Waiters of
        # a loop that has stopped are gone: waking them would fail on their closed loop.
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if self._changed_on is None or self._changed_on is current:
            self._changed.set()
        self._changed = asyncio.Event()


__all__ = ["MemoryScheduler"]
