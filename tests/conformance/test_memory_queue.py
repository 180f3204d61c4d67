"""The work-queue conformance suite against the in-memory backing."""

from __future__ import annotations

import pytest

from durably.clock import Clock
from durably.memory.queue import MemoryWorkQueue
from durably.stores.work import QueuePolicy, WorkQueue
from durably.testing.queue import WorkQueueConformance, WorkQueueFactory


class TestMemoryWorkQueue(WorkQueueConformance):
    @pytest.fixture
    def work_queue_factory(self) -> WorkQueueFactory:
        async def make(clock: Clock, policy: QueuePolicy) -> WorkQueue:
            return MemoryWorkQueue(clock, policy)

        return make
