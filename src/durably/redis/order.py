"""Enqueue order: how items due at the same instant are ordered in a Redis ready set.

A ready set is scored by availability; equal scores fall back to the member, which starts
with a 16-digit order number. The number is read from the producer, as availability is:
the producer's clock in microseconds, and always above the last number this process drew,
so one process's items keep their enqueue order even when the clock stands still (a
`ManualClock`) or steps back. Between producers, equal availability is ordered by their
clocks, the same clocks that already order every item due at once. See docs/redis.md.
"""

from __future__ import annotations

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

__all__ = ["EnqueueOrder", "ready_member", "reserve_members"]
