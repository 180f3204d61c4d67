"""Every conformance suite against Redis: a standalone server (AOF on) and a 3-master cluster.

The servers are started by `tests.redis_service`; each factory call gets a fresh namespace
(dropped after the test), so every store starts empty and isolated.
"""

from __future__ import annotations

from typing import Any

import pytest

from durably.claimcheck.store import ClaimCheckStore
from durably.clock import Clock
from durably.redis import (
    RedisCheckpointer,
    RedisClaimCheckStore,
    RedisDurable,
    RedisEffectKit,
    RedisScheduler,
    RedisStateStore,
    RedisWorkQueue,
)
from durably.stores.runs import Scrubber, StateStore
from durably.stores.work import QueuePolicy, WorkQueue
from durably.stores.workflows import Checkpointer, Durable, Scheduler
from durably.testing import (
    CheckpointerConformance,
    ClaimCheckStoreConformance,
    DurableConformance,
    SchedulerConformance,
    StateStoreConformance,
    WorkQueueConformance,
)
from durably.testing.checkpointer import CheckpointerFactory
from durably.testing.claimcheck import ClaimCheckStoreFactory
from durably.testing.durable import DurableFactory
from durably.testing.queue import WorkQueueFactory
from durably.testing.scheduler import SchedulerFactory
from durably.testing.state import StateStoreFactory
from tests.redis_service import any_redis, namespace_for

__all__ = ["any_redis"]


@pytest.fixture
def state_store_factory(any_redis: Any) -> StateStoreFactory:
    async def make(clock: Clock, scrub: Scrubber | None = None) -> StateStore:
        prefix = namespace_for(any_redis)
        return RedisStateStore(any_redis, clock=clock, key_prefix=prefix, scrub=scrub)

    return make


@pytest.fixture
def work_queue_factory(any_redis: Any) -> WorkQueueFactory:
    async def make(clock: Clock, policy: QueuePolicy) -> WorkQueue:
        return RedisWorkQueue(
            any_redis, clock=clock, policy=policy, key_prefix=namespace_for(any_redis)
        )

    return make


class TestRedisStateStore(StateStoreConformance):
    pass


class TestRedisWorkQueue(WorkQueueConformance):
    pass


@pytest.fixture
def workflow_namespace(any_redis: Any) -> str:
    """One namespace per test, shared by its checkpointers and its effect kit."""
    return namespace_for(any_redis)


@pytest.fixture
def effect_kit(any_redis: Any, workflow_namespace: str) -> RedisEffectKit:
    return RedisEffectKit(any_redis, workflow_namespace)


@pytest.fixture
def checkpointer_factory(any_redis: Any, workflow_namespace: str) -> CheckpointerFactory:
    async def make() -> Checkpointer[Any]:
        return RedisCheckpointer(any_redis, key_prefix=workflow_namespace)

    return make


@pytest.fixture
def scheduler_factory(any_redis: Any) -> SchedulerFactory:
    async def make(lease: float) -> Scheduler:
        return RedisScheduler(any_redis, lease=lease, key_prefix=namespace_for(any_redis))

    return make


@pytest.fixture
def durable_factory(any_redis: Any) -> DurableFactory:
    async def make() -> Durable[Any]:
        ns = namespace_for(any_redis)
        return RedisDurable(
            RedisCheckpointer(any_redis, key_prefix=ns),
            RedisScheduler(any_redis, key_prefix=ns),
        )

    return make


class TestRedisCheckpointer(CheckpointerConformance):
    pass


class TestRedisScheduler(SchedulerConformance):
    pass


class TestRedisDurable(DurableConformance):
    pass


@pytest.fixture
def claim_store_factory(any_redis: Any) -> ClaimCheckStoreFactory:
    async def make(clock: Clock) -> ClaimCheckStore:
        return RedisClaimCheckStore(any_redis, clock=clock, key_prefix=namespace_for(any_redis))

    return make


class TestRedisClaimCheckStore(ClaimCheckStoreConformance):
    pass
