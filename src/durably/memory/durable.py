"""The in-memory `Durable`: each transition's two writes happen with no await between
them, so under asyncio nothing can observe one without the other."""

from __future__ import annotations

from durably.memory.checkpointer import MemoryCheckpointer, MemoryEffect
from durably.memory.scheduler import MemoryScheduler
from durably.stores.workflows import Entry, Recorded, ready_priority
from durably.validation import identifier


class MemoryDurable:
    """A `Durable[MemoryEffect]` over a `MemoryCheckpointer` and a `MemoryScheduler`."""

    def __init__(self, checkpointer: MemoryCheckpointer, scheduler: MemoryScheduler) -> None:
        self._checkpointer = checkpointer
        self._scheduler = scheduler
        # A workflow a gate admits is made ready in the write that frees its slot.
        checkpointer._wake_in(scheduler.namespace, scheduler._make_ready_now)

    async def close(self) -> None:
        """Close the checkpointer and the scheduler (idempotent)."""
        await self._checkpointer.close()
        await self._scheduler.close()

    @property
    def checkpointer(self) -> MemoryCheckpointer:
        """Where records and claims live."""
        return self._checkpointer

    @property
    def scheduler(self) -> MemoryScheduler:
        """Where wakeups live."""
        return self._scheduler

    async def arrive(
        self,
        workflow: str,
        key: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
    ) -> Recorded[object]:
        """Supply ``key`` (first writer wins) and make the workflow ready for ``tenant``
        at ``priority``."""
        identifier(workflow, "workflow")
        if tenant is not None:
            identifier(tenant, "tenant")
        ready_priority(priority)
        recorded = self._checkpointer._supply_now(workflow, key, value)
        self._scheduler._make_ready_now(workflow, tenant, priority)
        return recorded

    async def deliver(
        self,
        workflow: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
        unless_finished: bool = False,
    ) -> Entry:
        """Append a message and make the workflow ready for ``tenant`` at ``priority``;
        with ``unless_finished``, `WorkflowFinishedError` for a finished workflow (nothing
        written or woken)."""
        identifier(workflow, "workflow")
        if tenant is not None:
            identifier(tenant, "tenant")
        ready_priority(priority)
        entry = self._checkpointer._append_now(workflow, value, unless_finished)
        self._scheduler._make_ready_now(workflow, tenant, priority)
        return entry

    async def delete(self, workflow: str) -> int:
        """Cancel the workflow's wakeups and discard its records; the count discarded."""
        identifier(workflow, "workflow")
        self._scheduler._cancel_now(workflow)
        return self._checkpointer._discard_now(workflow)


__all__ = ["MemoryDurable", "MemoryEffect"]
