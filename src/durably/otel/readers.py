"""Reading what the stores hold for gauges and pages: queue depth, lag and dead letters,
and workflows by status, in a bounded number of store calls whatever their size."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from durably.otel.instruments import Gauges, QueueGauges
from durably.stores.status import WorkflowStatus
from durably.stores.work import WorkQueue
from durably.stores.workflows import Checkpointer

STATUS_BOUND = 1000
"""Workflows counted per status at most: a status with more reads as this many."""

STATUS_PAGE = 1000


async def read_queues(queues: Iterable[tuple[WorkQueue, str]]) -> tuple[QueueGauges, ...]:
    """Each named queue's depth, held items, dead letters and the age of its oldest due
    item (one `WorkQueue.stats` call per queue)."""
    pairs = list(queues)
    stats = await asyncio.gather(*(queue.stats(queue=name) for queue, name in pairs))
    return tuple(
        QueueGauges(
            queue=name,
            depth=found.depth,
            claimed=found.claimed,
            dead_lettered=found.dead_lettered,
            oldest_due_age_seconds=found.oldest_age_seconds,
        )
        for (_, name), found in zip(pairs, stats, strict=True)
    )


async def read_workflows_by_status(
    checkpointer: Checkpointer[Any], *, bound: int = STATUS_BOUND
) -> dict[str, int]:
    """How many workflows each status holds, each counted up to ``bound`` (pages of
    `Checkpointer.list_status`, so the cost is bounded at any size)."""
    counts: dict[str, int] = {}
    for status in WorkflowStatus:
        seen = 0
        after: str | None = None
        while seen < bound:
            page = await checkpointer.list_status(
                status=status, limit=min(STATUS_PAGE, bound - seen), after=after
            )
            seen += len(page)
            if len(page) < STATUS_PAGE or not page:
                break
            after = page[-1].workflow
        counts[status.value] = min(seen, bound)
    return counts


async def read_gauges(
    queues: Iterable[tuple[WorkQueue, str]] = (),
    checkpointer: Checkpointer[Any] | None = None,
    *,
    status_bound: int = STATUS_BOUND,
) -> Gauges:
    """Everything the store-backed gauges show: the named queues and, with a
    ``checkpointer``, workflows by status (counted up to ``status_bound`` each)."""
    read = await read_queues(queues)
    by_status = (
        {}
        if checkpointer is None
        else await read_workflows_by_status(checkpointer, bound=status_bound)
    )
    return Gauges(queues=read, workflows_by_status=by_status)


__all__ = ["STATUS_BOUND", "read_gauges", "read_queues", "read_workflows_by_status"]
