"""Every conformance suite against Redis: a standalone server (AOF on) and a 3-master cluster.

The servers are started by `tests.redis_service`; each factory call gets a fresh namespace
(dropped after the test), so every store starts empty and isolated.
"""

from __future__ import annotations

from typing import Any

import pytest

from durably.clock import Clock
from durably.redis.queue import RedisWorkQueue
from durably.redis.state import RedisStateStore
from durably.runs import StateStore
from durably.testing import StateStoreConformance, WorkQueueConformance
from durably.testing.queue import WorkQueueFactory
from durably.testing.state import StateStoreFactory
from durably.work import QueuePolicy, WorkQueue
from tests.redis_service import any_redis, namespace_for

__all__ = ["any_redis"]


@pytest.fixture
def state_store_factory(any_redis: Any) -> StateStoreFactory:
    async def make(clock: Clock) -> StateStore:
        return RedisStateStore(any_redis, clock=clock, namespace=namespace_for(any_redis))

    return make


@pytest.fixture
def work_queue_factory(any_redis: Any) -> WorkQueueFactory:
    async def make(clock: Clock, policy: QueuePolicy) -> WorkQueue:
        return RedisWorkQueue(
            any_redis, clock=clock, policy=policy, namespace=namespace_for(any_redis)
        )

    return make


class TestRedisStateStore(StateStoreConformance):
    pass


class TestRedisWorkQueue(WorkQueueConformance):
    pass
