"""The memory rotation index: the work queue's (the in-process twin of SQLite's
``durably_queue_tenants`` and Redis's ``rota``/``waiting``), and the scheduler's.

Per queue: the tenants whose oldest queued item is due, in the order a claim serves them
(turn, then that item's availability and enqueue order), and apart from them the tenants
whose oldest item is not yet due, by when it comes due. Per tenant: its queued items in the
order it gives them out (priority, availability, enqueue order). So a claim costs O(log n)
in items and tenants. The heaps delete lazily: an entry whose mark or stamp is no longer
current is dropped when it surfaces, and a heap grown past twice what it can hold live is
rebuilt (amortized O(1) an entry).

Exact ties are broken by a sequence the owner gives with each item: the queue's enqueue
order (an int), the scheduler's workflow id (a str).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import Any, Generic, TypeVar

_SLACK = 32  # stale entries a heap may carry beyond its live ones before it is rebuilt

S = TypeVar("S", int, str)  # the tie-breaking sequence: one type per rotation
_Head = tuple[float, Any]  # (available_at, sequence) of a tenant's oldest item
_Where = tuple[bool, int, _Head]  # (in the rotation, turn, head) as last placed
Admits = Callable[[str], bool]  # whether an item (by id) of one tenant may be taken now


def _compact(heap: list[Any], live: int, current: Any) -> None:
    """Rebuild ``heap`` without its stale entries once they outnumber ``live`` (the most
    entries that can be current) by more than the slack."""
    if len(heap) > 2 * live + _SLACK:
        heap[:] = [entry for entry in heap if current(entry)]
        heapq.heapify(heap)


@dataclass(slots=True)
class _Tenant(Generic[S]):
    """One tenant's queued items of one queue and its place in the queue's rotation."""

    # item id -> mark of its current queued stretch; heap entries carrying another are stale
    queued: dict[str, int] = field(default_factory=dict)
    by_age: list[tuple[float, S, int, str]] = field(default_factory=list)  # at, seq, mark, id
    # items not yet known to be due, by availability: (at, seq, mark, id, priority)
    pending: list[tuple[float, S, int, str, int]] = field(default_factory=list)
    # due items in the order the tenant gives them out: (-priority, at, seq, mark, id)
    ready: list[tuple[int, float, S, int, str]] = field(default_factory=list)
    turn: int = 0  # 0 = never served; kept when the tenant runs out of items
    where: _Where | None = None  # None: no queued item, in neither heap of the queue
    stamp: int = 0  # the queue's heap entries for this tenant carrying another are stale

    def current(self, item_id: str, mark: int) -> bool:
        return self.queued.get(item_id) == mark

    def head(self) -> _Head | None:
        """(available_at, sequence) of the oldest queued item, if any."""
        by_age = self.by_age
        while by_age:
            at, sequence, mark, item_id = by_age[0]
            if self.queued.get(item_id) == mark:
                return at, sequence
            heapq.heappop(by_age)
        return None

    def pop_due(self, now: float, admits: Admits | None = None) -> tuple[str | None, bool]:
        """Take the first due item in the tenant's order that ``admits`` lets through (its
        id), if one is; and whether a due item was passed over for ``admits``."""
        pending, ready = self.pending, self.ready
        while pending and pending[0][0] <= now:
            at, sequence, mark, item_id, priority = heapq.heappop(pending)
            if self.queued.get(item_id) == mark:
                heapq.heappush(ready, (-priority, at, sequence, mark, item_id))
        passed: list[tuple[int, float, S, int, str]] = []
        found: str | None = None
        while ready:
            entry = heapq.heappop(ready)
            mark, item_id = entry[3], entry[4]
            if self.queued.get(item_id) != mark:
                continue
            if admits is None or admits(item_id):
                del self.queued[item_id]
                found = item_id
                break
            passed.append(entry)  # its gate is shut: it keeps its place
        for entry in passed:
            heapq.heappush(ready, entry)
        return found, bool(passed)


class Rotation(Generic[S]):
    """One queue's index of queued items: `add` and `discard` as items enter and leave the
    queued state, `take` for a claim, `oldest` for `stats` (kept only when ``ages``: the
    scheduler has no use for it). Holds ids and ordering fields only; the items themselves
    stay with their owner."""

    def __init__(self, *, ages: bool = True) -> None:
        self._keeps_ages = ages
        self._tenants: dict[str, _Tenant[S]] = {}
        self._rota: list[tuple[int, float, S, int, str]] = []  # turn, at, seq, stamp, tenant
        self._waiting: list[tuple[float, int, str]] = []  # head's at, stamp, tenant
        self._ages: list[tuple[float, S, int, str, str]] = []  # at, seq, mark, tenant, id
        self._marks = count(1)
        self._last_turn = 0
        self._depth = 0  # queued items (bounds the live entries of ``_ages``)

    def add(
        self,
        tenant: str,
        item_id: str,
        *,
        priority: int,
        available_at: float,
        sequence: S,
        now: float,
    ) -> None:
        """``item_id`` of ``tenant`` is queued (again): index it and place its tenant."""
        state = self._tenants.get(tenant)
        if state is None:
            state = self._tenants[tenant] = _Tenant[S]()
        mark = next(self._marks)
        if state.queued.get(item_id) is None:
            self._depth += 1
        state.queued[item_id] = mark
        live = len(state.queued)
        heapq.heappush(state.by_age, (available_at, sequence, mark, item_id))
        _compact(state.by_age, live, lambda entry: state.current(entry[3], entry[2]))
        if available_at <= now:
            heapq.heappush(state.ready, (-priority, available_at, sequence, mark, item_id))
            _compact(state.ready, live, lambda entry: state.current(entry[4], entry[3]))
        else:
            heapq.heappush(state.pending, (available_at, sequence, mark, item_id, priority))
            _compact(state.pending, live, lambda entry: state.current(entry[3], entry[2]))
        if self._keeps_ages:
            heapq.heappush(self._ages, (available_at, sequence, mark, tenant, item_id))
            _compact(self._ages, self._depth, self._current_age)
        self._place(tenant, state, now)

    def discard(self, tenant: str, item_id: str, now: float) -> None:
        """``item_id`` of ``tenant`` left the queued state other than by `take` (a no-op if
        it is not indexed)."""
        state = self._tenants.get(tenant)
        if state is None or state.queued.pop(item_id, None) is None:
            return
        self._depth -= 1
        self._place(tenant, state, now)

    def take(
        self, now: float, admits: Callable[[str], Admits] | None = None
    ) -> tuple[str, str] | None:
        """A claim's choice, removed from the index: (tenant, item id) of the first due item
        of the first tenant in the rotation, whose turn goes above every other; None if no
        item is due. With ``admits`` (a tenant's item filter, for flow control), items it
        refuses are passed over in place, and a tenant with only such items keeps its
        turn."""
        waiting = self._waiting
        while waiting and waiting[0][0] <= now:
            _, stamp, tenant = heapq.heappop(waiting)
            state = self._tenants[tenant]
            if state.stamp == stamp:
                self._place(tenant, state, now)  # its oldest item has come due
        rota = self._rota
        passed: list[tuple[int, float, S, int, str]] = []
        try:
            return self._take(now, admits, passed)
        finally:
            for entry in passed:
                heapq.heappush(rota, entry)

    def _take(
        self,
        now: float,
        admits: Callable[[str], Admits] | None,
        passed: list[tuple[int, float, S, int, str]],
    ) -> tuple[str, str] | None:
        rota = self._rota
        while rota:
            entry = heapq.heappop(rota)
            stamp, tenant = entry[3], entry[4]
            state = self._tenants[tenant]
            if state.stamp != stamp:
                continue
            item_id, blocked = state.pop_due(now, None if admits is None else admits(tenant))
            if item_id is None and blocked:
                passed.append(entry)  # every due item of the tenant is held by its gate
                continue
            state.where = None
            self._last_turn += 1
            state.turn = self._last_turn
            self._place(tenant, state, now)
            if item_id is not None:
                self._depth -= 1
                return tenant, item_id
            # A tenant in the rotation has a due item unless the clock ran back; it has just
            # been put where its items say (waiting), so look again, as SQLite's claim does.
            assert state.where is None or not state.where[0], "rotation index out of step"
        return None

    def oldest(self, now: float) -> float | None:
        """The availability of the queue's oldest due item, if one is due."""
        ages = self._ages
        while ages:
            at, _, mark, tenant, item_id = ages[0]
            if self._tenants[tenant].current(item_id, mark):
                return at if at <= now else None
            heapq.heappop(ages)
        return None

    def _current_age(self, entry: tuple[float, S, int, str, str]) -> bool:
        return self._tenants[entry[3]].current(entry[4], entry[2])

    def _place(self, tenant: str, state: _Tenant[S], now: float) -> None:
        """Put ``tenant`` where its oldest item says: in the rotation if that is due,
        waiting if not, in neither if it has none. Unchanged places push nothing."""
        head = state.head()
        where = None if head is None else (head[0] <= now, state.turn, head)
        if where == state.where:
            return
        state.where = where
        state.stamp += 1
        if head is None:
            return
        tenants = len(self._tenants)
        if head[0] <= now:
            heapq.heappush(self._rota, (state.turn, head[0], head[1], state.stamp, tenant))
            _compact(self._rota, tenants, lambda entry: self._tenants[entry[4]].stamp == entry[3])
        else:
            heapq.heappush(self._waiting, (head[0], state.stamp, tenant))
            _compact(
                self._waiting, tenants, lambda entry: self._tenants[entry[2]].stamp == entry[1]
            )


__all__ = ["Rotation"]
