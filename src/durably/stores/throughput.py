"""Throughput: how many work items and workflows finished in each of the last minutes.

Every backing counts, in the same write that finishes an item (completed or
dead-lettered) or ends a workflow (completed or failed), into a ring of `SLOTS` minutes
per queue or workflow kind: a slot holds the minute it counts, and a write for a later
minute starts the slot afresh. So what is kept never grows with time, a reader reads
`SLOTS` rows per name whatever the store holds, and minutes older than the ring are
forgotten. Minutes are the store's clock's (seconds since the epoch divided by 60).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from durably.errors import InvalidInputError
from durably.stores.status import WorkflowStatus
from durably.validation import identifier

MINUTES = 15
"""Minutes a reading covers: the current one and the 14 before it."""

SLOTS = 16
"""Minutes a ring keeps (one more than `MINUTES`, so the oldest one read is never being
restarted under the reader)."""

SHARDS = 64
"""Rows a PostgreSQL ring spreads each slot over (by the writer's backend for items, by
workflow for workflows), so concurrent writes of one queue or kind rarely wait on one row
lock until commit; a reader adds them up. 8 were measured too few for 8 workers (their
pool's backends collided)."""

RATED_STATUSES = (WorkflowStatus.COMPLETED, WorkflowStatus.FAILED)
"""The statuses a workflow is counted in on reaching (failed counts as failed)."""

NAMES_MOST = 100
"""Queues one `finished_per_minute` call reads at most."""


@dataclass(frozen=True, slots=True)
class Minute:
    """What finished in one minute: ``completed`` and ``failed`` (an item dead-lettered, a
    workflow that failed)."""

    minute: int
    """Minutes since the epoch, UTC."""
    completed: int
    failed: int

    @property
    def at(self) -> float:
        """The minute's start, seconds since the epoch."""
        return self.minute * 60.0


def minute_of(now: float) -> int:
    """The minute ``now`` (seconds since the epoch) falls in."""
    return int(now // 60)


def slot_of(minute: int) -> int:
    """The ring slot that counts ``minute``."""
    return minute % SLOTS


def first_minute(now: float) -> int:
    """The oldest minute a reading at ``now`` covers."""
    return minute_of(now) - MINUTES + 1


def rated(rows: Iterable[tuple[str, int, int, int]], now: float) -> dict[str, list[Minute]]:
    """Rows of (name, minute, completed, failed), shards and all, as each name's minutes
    within the last `MINUTES` at ``now``, oldest first; minutes outside, and minutes in
    which nothing finished, are left out."""
    first, last = first_minute(now), minute_of(now)
    summed: dict[tuple[str, int], list[int]] = {}
    for name, minute, completed, failed in rows:
        if first <= int(minute) <= last and (completed or failed):
            counts = summed.setdefault((str(name), int(minute)), [0, 0])
            counts[0] += int(completed)
            counts[1] += int(failed)
    found: dict[str, list[Minute]] = {}
    for (name, minute), (completed, failed) in sorted(summed.items()):
        found.setdefault(name, []).append(Minute(minute, completed, failed))
    return found


def rated_queues(queues: Sequence[str]) -> list[str]:
    """``queues`` of a `finished_per_minute` call, checked before any I/O: identifiers, at
    most `NAMES_MOST`. Raises `InvalidInputError`."""
    if isinstance(queues, str):
        raise InvalidInputError("queues: a list of queue names, not one string")
    names = [identifier(name, "queues") for name in queues]
    if len(names) > NAMES_MOST:
        raise InvalidInputError(f"queues: at most {NAMES_MOST}, got {len(names)}")
    return names


@dataclass
class Ring:
    """The ring of one backing that keeps it in process memory: name -> slot -> [minute,
    completed, failed]."""

    slots: dict[str, dict[int, list[int]]] = field(default_factory=dict)

    def count(self, name: str, now: float, *, failed: bool) -> None:
        """Count one finished item or workflow of ``name`` at ``now``."""
        minute = minute_of(now)
        ring = self.slots.setdefault(name, {})
        held = ring.get(slot_of(minute))
        if held is None or held[0] < minute:
            held = ring[slot_of(minute)] = [minute, 0, 0]
        elif held[0] > minute:  # a write late for a minute the slot has moved past
            return
        held[2 if failed else 1] += 1

    def read(self, names: Iterable[str] | None, now: float) -> dict[str, list[Minute]]:
        """The minutes of ``names`` (None: every name) as `rated` answers them."""
        chosen = self.slots if names is None else {n: self.slots.get(n, {}) for n in names}
        rows = [(n, h[0], h[1], h[2]) for n, ring in chosen.items() for h in ring.values()]
        return rated(rows, now)


__all__ = [
    "MINUTES",
    "NAMES_MOST",
    "RATED_STATUSES",
    "SHARDS",
    "SLOTS",
    "Minute",
    "Ring",
    "first_minute",
    "minute_of",
    "rated",
    "rated_queues",
    "slot_of",
]
