"""The in-memory `Scheduler`: one entry per workflow in a dict, hand-outs on an event.

Ready entries are also kept in a heap by (visible since, workflow), sleeping ones in a heap
by (due, workflow), so a hand-out and a wake of the due cost O(log n) however many
workflows wait. Heap rows are never updated in place: a change pushes a new row, and a
row whose entry has moved on since (taken, put to sleep, done, cancelled) is dropped when
it reaches the top; the heaps are rebuilt when stale rows outnumber live ones.

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
from collections.abc import Callable
from dataclasses import dataclass

from durably.stores.workflows import DEFAULT_LEASE, DEFAULT_NAMESPACE, Delivery
from durably.validation import finite, identifier, non_negative, positive


@dataclass(slots=True)
class _Entry:
    ready: bool
    visible_at: float  # store clock; meaningful while ready
    due: float  # caller's clock; meaningful while sleeping
    receipt: str | None = None
    taken_at: float = 0.0


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
        # Rows (time, workflow, push number, entry): ready by visible_at, sleeping by due.
        self._visible: list[tuple[float, str, int, _Entry]] = []
        self._sleeping: list[tuple[float, str, int, _Entry]] = []
        self._pushes = itertools.count()
        self._changed = asyncio.Event()
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

    async def make_ready(self, workflow: str) -> None:
        """Make the workflow runnable now; a delivery in flight no longer answers it."""
        self._make_ready_now(workflow)

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
                entry.visible_at = store_now
                self._push(self._visible, store_now, workflow, entry)
                woken += 1
        if woken:
            self._notify()
        return woken

    async def next_ready(self, within: float) -> Delivery | None:
        """Take the ready workflow visible longest, waiting up to ``within`` seconds."""
        non_negative(within, "within")
        deadline = self._now() + within
        while True:
            changed = self._changed
            now = self._now()
            taken = self._take(now)
            if taken is not None:
                return taken
            remaining = deadline - now
            if remaining <= 0:
                return None
            # Also wake when a hand-out's lease lapses, not only on a change (`_take` left
            # the earliest live row on top).
            upcoming = self._visible[0][0] - now if self._visible else remaining
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
                entry.receipt = None
                entry.visible_at = now
                self._push(self._visible, now, workflow, entry)
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
        self._push(self._visible, entry.visible_at, delivery.workflow, entry)
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

    def _make_ready_now(self, workflow: str) -> None:
        identifier(workflow, "workflow")
        now = self._now()
        entry = self._entries.get(workflow)
        if entry is None:
            entry = self._entries[workflow] = _Entry(ready=True, visible_at=now, due=now)
        else:
            entry.ready = True
            entry.visible_at = now
            entry.receipt = None
        self._push(self._visible, now, workflow, entry)
        self._notify()

    def _cancel_now(self, workflow: str) -> None:
        identifier(workflow, "workflow")
        self._entries.pop(workflow, None)

    # --- internals -------------------------------------------------------------------------

    def _take(self, now: float) -> Delivery | None:
        visible = self._visible
        while visible:
            at, workflow, _, entry = visible[0]
            if not self._shown(at, workflow, entry):
                heapq.heappop(visible)  # its entry moved on since the row was pushed
                continue
            if at > now:
                return None  # the earliest hand-out is still leased
            heapq.heappop(visible)
            entry.receipt = f"{self._instance}:{next(self._receipts)}"
            entry.taken_at = now
            entry.visible_at = now + self._lease
            self._push(visible, entry.visible_at, workflow, entry)
            return Delivery(workflow, entry.receipt)
        return None

    def _shown(self, at: float, workflow: str, entry: _Entry) -> bool:
        """Whether a row of the ready heap still stands for its entry."""
        return entry.ready and entry.visible_at == at and self._entries.get(workflow) is entry

    def _asleep(self, due: float, workflow: str, entry: _Entry) -> bool:
        """Whether a row of the sleeping heap still stands for its entry."""
        return not entry.ready and entry.due == due and self._entries.get(workflow) is entry

    def _push(
        self, heap: list[tuple[float, str, int, _Entry]], at: float, workflow: str, entry: _Entry
    ) -> None:
        heapq.heappush(heap, (at, workflow, next(self._pushes), entry))
        if len(heap) > 2 * len(self._entries) + 64:
            # Mostly stale rows: keep the live ones (each entry's newest), rebuilt in place.
            live = self._shown if heap is self._visible else self._asleep
            kept = {row[1]: row for row in heap if live(row[0], row[1], row[3])}
            heap[:] = list(kept.values())
            heapq.heapify(heap)

    def _notify(self) -> None:
        # Wake every waiter, then give later waiters a fresh event to wait on.
        self._changed.set()
        self._changed = asyncio.Event()


__all__ = ["MemoryScheduler"]
