"""The memory queue's rotation index gives out items in the queue's fairness order: random enqueues
(delayed, of several priorities, tenants and queues), claims, failures, completions, reaps
and clock moves, each claim checked against the order worked out by reading every item."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from durably.clock import ManualClock
from durably.errors import LeaseLostError, WorkItemNotFoundError
from durably.memory import MemoryWorkQueue
from durably.stores.work import QueuePolicy, WorkItem, WorkPriority, WorkState

TENANTS = ("a", "b", "c", "d")
QUEUES = ("default", "other")
POLICY = QueuePolicy(lease_seconds=5, max_attempts=3, backoff_seconds=1)


@dataclass
class _Seen:
    """What the reference knows of an item: enough to order it."""

    queue: str
    priority: int
    available_at: float
    sequence: int
    state: WorkState


class _Reference:
    """The fairness order worked out the slow way, from every item."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], _Seen] = {}
        self.turns: dict[str, dict[str, int]] = {}
        self.sequence = 0

    def enqueued(self, item: WorkItem) -> None:
        known = self.items.get((item.tenant, item.id))
        if known is not None and not known.state.terminal:
            return  # a duplicate: nothing changes
        self.sequence += 1
        self.moved(item, self.sequence)

    def moved(self, item: WorkItem, sequence: int | None = None) -> None:
        key = (item.tenant, item.id)
        assert item.available_at is not None
        self.items[key] = _Seen(
            item.queue,
            int(item.priority),
            item.available_at,
            self.items[key].sequence if sequence is None else sequence,
            item.state,
        )

    def next(self, queue: str, now: float) -> tuple[str, str] | None:
        due = [
            (key, seen)
            for key, seen in self.items.items()
            if seen.queue == queue and seen.state is WorkState.QUEUED and seen.available_at <= now
        ]
        if not due:
            return None
        turns = self.turns.setdefault(queue, {})
        oldest: dict[str, tuple[float, int]] = {}
        for (tenant, _), seen in due:
            age = (seen.available_at, seen.sequence)
            oldest[tenant] = min(oldest.get(tenant, age), age)
        tenant = min(oldest, key=lambda t: (turns.get(t, 0), oldest[t]))
        key, _ = min(
            ((key, seen) for key, seen in due if key[0] == tenant),
            key=lambda pair: (-pair[1].priority, pair[1].available_at, pair[1].sequence),
        )
        turns[tenant] = max(turns.values(), default=0) + 1
        return key


_ENQUEUE = st.tuples(
    st.just("enqueue"),
    st.sampled_from(TENANTS),
    st.integers(0, 11),
    st.sampled_from(QUEUES),
    st.sampled_from(list(WorkPriority)),
    st.sampled_from([None, 0.0, 0.5, 2.0, 7.0]),  # delay
)
_CLAIM = st.tuples(st.just("claim"), st.sampled_from(QUEUES))
_STEPS = st.lists(
    st.one_of(
        _ENQUEUE,
        _ENQUEUE,
        _CLAIM,
        _CLAIM,
        st.tuples(st.just("settle"), st.integers(0, 7), st.sampled_from(["done", "retry", "dead"])),
        st.tuples(st.just("advance"), st.sampled_from([0.5, 1.0, 3.0, 6.0])),
        st.tuples(st.just("reap")),
        st.tuples(st.just("adopt")),
    ),
    min_size=10,
    max_size=80,
)


async def _walk(steps: list[tuple[object, ...]]) -> None:
    clock = ManualClock()
    queue = MemoryWorkQueue(clock, POLICY)
    reference = _Reference()
    held: list[WorkItem] = []
    for step in steps:
        match step:
            case (
                "enqueue",
                str(tenant),
                int(n),
                str(name),
                WorkPriority() as priority,
                None | float() as delay,
            ):
                at = None if delay is None else clock.now() + delay
                item = WorkItem(
                    tenant=tenant, id=f"i{n}", queue=name, priority=priority, available_at=at
                )
                reference.enqueued(await queue.enqueue(item))
            case ("claim", str(name)):
                expected = reference.next(name, clock.now())
                claimed = await queue.claim(worker="w", queue=name)
                assert (None if claimed is None else (claimed.tenant, claimed.id)) == expected
                if claimed is not None:
                    reference.moved(claimed)
                    held.append(claimed)
            case ("settle", int(n), str(how)) if held:
                item = held.pop(n % len(held))
                try:
                    if how == "done":
                        settled = await queue.complete(item.id, tenant=item.tenant, worker="w")
                    else:
                        settled = await queue.fail(
                            item.id, tenant=item.tenant, worker="w", error="x",
                            retryable=how == "retry",
                        )  # fmt: skip
                except (LeaseLostError, WorkItemNotFoundError):  # lapsed, or reaped: no move
                    continue
                reference.moved(settled)
            case ("advance", float(seconds)):
                clock.advance(seconds)
            case ("reap",):
                for settled in await queue.reap():
                    reference.moved(settled)
            case ("adopt",):
                for settled in await queue.adopt(worker="w"):
                    reference.moved(settled)
                held.clear()
        now = clock.now()
        queued = [
            seen.available_at
            for seen in reference.items.values()
            if seen.queue == "default" and seen.state is WorkState.QUEUED
        ]
        stats = await queue.stats()
        assert stats.depth == len(queued)
        oldest = min((at for at in queued if at <= now), default=now)
        assert stats.oldest_age_seconds == now - oldest


@settings(max_examples=300, deadline=None)
@given(_STEPS)
def test_claims_follow_the_fairness_order_of_spec(steps: list[tuple[object, ...]]) -> None:
    asyncio.run(_walk(steps))
