"""The retention sweep: delete finished workflows (records, status and claim) once they are
old enough, without ever rewinding a fencing token.

`Checkpointer.sweep` does the deleting; `sweep` here runs it through a `Durable` so the
scheduler entries of swept workflows go with them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from durably.errors import InvalidInputError
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Durable
from durably.validation import positive_int

FINISHED: tuple[WorkflowStatus, ...] = tuple(s for s in WorkflowStatus if s.finished)
"""The statuses a sweep may delete (completed and failed)."""

Swept = Callable[[str], Awaitable[None]]
"""Called with each swept workflow's id, after its sweep committed."""


def sweep_arguments(finished_before: object, limit: object) -> datetime:
    """``finished_before`` if it is a timezone-aware datetime and ``limit`` a positive int;
    `InvalidInputError` (a `ValueError`) otherwise. Every backing checks with this before
    any I/O."""
    if not isinstance(finished_before, datetime):
        raise InvalidInputError(
            f"finished_before must be a datetime, got {type(finished_before).__name__}"
        )
    if finished_before.utcoffset() is None:
        raise InvalidInputError(
            "finished_before must be timezone-aware (e.g. datetime.now(UTC) - timedelta(days=7))"
        )
    positive_int(limit, "limit")
    return finished_before


async def sweep(
    durable: Durable[Any],
    *,
    finished_before: datetime,
    limit: int = 1000,
    on_swept: Swept | None = None,
) -> int:
    """Sweep up to ``limit`` finished workflows last updated before ``finished_before``
    and cancel their entries in ``durable``'s scheduler; the number swept.

    A wakeup left for a finished workflow (an `arrive` after it completed, not yet taken)
    would otherwise start it again from nothing. ``on_swept`` is awaited after each
    cancel. Raises `InvalidInputError` for a naive datetime or a limit below 1.
    """
    sweep_arguments(finished_before, limit)
    scheduler = durable.scheduler

    async def swept(workflow: str) -> None:
        await scheduler.cancel(workflow)
        if on_swept is not None:
            await on_swept(workflow)

    return await durable.checkpointer.sweep(
        finished_before=finished_before, limit=limit, on_swept=swept
    )


__all__ = ["FINISHED", "Swept", "sweep", "sweep_arguments"]
