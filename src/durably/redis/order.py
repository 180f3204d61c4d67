"""Enqueue order: how items due at the same instant are ordered in a Redis ready set.

A ready set is scored by availability; equal scores fall back to the member, which starts
with a 16-digit order number. The number is read from the producer, as availability is:
the producer's clock in microseconds, and always above the last number this process drew,
so one process's items keep their enqueue order even when the clock stands still (a
`ManualClock`) or steps back. Between producers, equal availability is ordered by their
clocks, the same clocks that already order every item due at once. See docs/redis.md.
"""

from __future__ import annotations

from durably.stores.work import WorkPriority
from durably.stores.workflows import DEFAULT_PRIORITY

_WIDTH = 10**16  # 16 digits: microseconds since 1970 fit until the year 2286


class EnqueueOrder:
    """Order numbers drawn by one producer: never below the clock, always rising."""

    def __init__(self) -> None:
        self._last = 0

    def member(self, now: float, item_id: str) -> str:
        """The ready-set member of an item enqueued at ``now``: a 16-digit order number,
        then the id (the Lua scripts read it back from character 17). The number is ``now``
        in microseconds, or one above the last drawn if that is higher; zero-padded, so
        text order is number order. Two threads drawing at once may get the same number:
        the tie then falls to the ids, as it does between producers."""
        micros = int(now * 1_000_000)
        self._last = last = micros if micros > self._last else self._last + 1
        return f"{last % _WIDTH:016d}{item_id}"

    def reserve(self, now: float, count: int) -> int:
        """The first of ``count`` consecutive order numbers drawn at ``now``, as ``count``
        calls of `member` would draw them: a batch's script numbers its items from it (the
        number is ``member``'s before the modulo)."""
        micros = int(now * 1_000_000)
        first = micros if micros > self._last else self._last + 1
        self._last = first + count - 1
        return first


# One per process: every queue of the process draws from it.
_ORDER = EnqueueOrder()
ready_member = _ORDER.member
reserve_members = _ORDER.reserve

# A line ranked by priority (a scheduler's per tenant, a gate's) scores each member by its
# priority's offset plus its order in the line (a visibility in microseconds since an
# epoch, a serial): a multiple of 2^51 per step from NORMAL, below it for a higher
# priority, so the lowest score is the highest priority, then the oldest, and every
# score stays an exact double (under 2^53 in magnitude).
_RANKED = sorted(int(priority) for priority in WorkPriority)
_OFFSETS = {
    value: str((_RANKED.index(DEFAULT_PRIORITY) - _RANKED.index(value)) * 2**51)
    for value in _RANKED
}


def priority_offset(priority: int) -> str:
    """The score offset of a `WorkPriority` value in a ranked line ('0' for NORMAL)."""
    return _OFFSETS[priority]


__all__ = ["EnqueueOrder", "priority_offset", "ready_member", "reserve_members"]
