"""The workflow throughput ring on a Redis server and a cluster: kept by the status
index's step in its own slot, read with the server's clock."""

from __future__ import annotations

import time
from typing import Any

from durably.redis import RedisCheckpointer
from durably.stores.catalog import CatalogEntry
from durably.stores.status import WorkflowStatus
from tests.redis_service import namespace_for


async def test_an_ended_workflow_is_counted_in_its_kinds_minute_once(any_redis: Any) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    for n, status in enumerate([WorkflowStatus.COMPLETED, WorkflowStatus.FAILED]):
        await checkpointer.catalog(f"w{n}", CatalogEntry("acme", "bill", 1))
        holder = await checkpointer.claim(f"w{n}", 30, 30)
        assert holder is not None
        await checkpointer.set_status(holder, WorkflowStatus.RUNNING)
        await checkpointer.set_status(holder, status)
        await checkpointer.set_status(holder, status)  # again: counted once
    found = await checkpointer.finished_per_minute()
    assert sum(m.completed for m in found["bill"]) == 1
    assert sum(m.failed for m in found["bill"]) == 1
    assert all(abs(m.at - time.time()) < 120 for m in found["bill"])
