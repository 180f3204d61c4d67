"""`durably.retention.sweep` through a `Durable`: swept workflows lose their wakeups too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from durably.memory import MemoryCheckpointer, MemoryDurable, MemoryScheduler
from durably.stores.retention import sweep
from durably.stores.status import WorkflowStatus


async def _finished(durable: MemoryDurable, workflow: str) -> None:
    holder = await durable.checkpointer.claim(workflow, 5.0, 5.0)
    assert holder is not None
    await durable.checkpointer.record(holder, "step", 1)
    await durable.checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
    await durable.checkpointer.release(holder)


async def test_a_sweep_through_a_durable_cancels_the_swept_workflows_wakeups() -> None:
    durable = MemoryDurable(MemoryCheckpointer(), MemoryScheduler(lease=5.0))
    await _finished(durable, "done")
    await durable.arrive("done", "late", True)  # a wakeup left after it finished
    await durable.arrive("waiting", "input", 1)  # never ran: no status, never swept
    heard: list[str] = []

    async def swept(workflow: str) -> None:
        heard.append(workflow)

    cutoff = datetime.now(UTC) + timedelta(hours=1)
    assert await sweep(durable, finished_before=cutoff, on_swept=swept) == 1
    assert heard == ["done"]
    assert await durable.checkpointer.load("done") == {}
    delivery = await durable.scheduler.next_ready(0)
    assert delivery is not None
    assert delivery.workflow == "waiting"
    assert await durable.scheduler.next_ready(0) is None


async def test_a_sweep_through_a_durable_refuses_bad_arguments_before_any_io() -> None:
    durable = MemoryDurable(MemoryCheckpointer(), MemoryScheduler(lease=5.0))
    await _finished(durable, "done")
    with pytest.raises(ValueError, match="timezone"):
        await sweep(durable, finished_before=datetime(2100, 1, 1))  # naive on purpose
    with pytest.raises(ValueError, match="limit"):
        await sweep(durable, finished_before=datetime.now(UTC), limit=0)
    assert await durable.checkpointer.load("done") == {"step": 1}
