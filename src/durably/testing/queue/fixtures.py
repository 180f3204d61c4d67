"""Fixtures and builders shared by the `WorkQueueConformance` cases."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from durably.clock import Clock, ManualClock
from durably.stores.work import QueuePolicy, WorkItem, WorkQueue

WorkQueueFactory = Callable[[Clock, QueuePolicy], Awaitable[WorkQueue]]

START = 1_000_000.0

# Small numbers so every expected instant is exact: leases of 10 s, a cap of 25 s,
# backoff 1, 2, 4, 4, ... and a dead letter at the third failure.
POLICY = QueuePolicy(
    lease_seconds=10.0,
    max_attempts=3,
    backoff_seconds=1.0,
    backoff_cap_seconds=4.0,
    max_lease_seconds=25.0,
)


def unique(prefix: str) -> str:
    """A fresh id, so cases never collide even on a shared namespace."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def new_item(tenant: str, item_id: str | None = None, **fields: Any) -> WorkItem:
    """A work item of ``tenant`` ready to enqueue."""
    return WorkItem(id=unique("item") if item_id is None else item_id, tenant=tenant, **fields)


class QueueFixtures:
    """The fixtures every queue case uses; the subclass provides ``work_queue_factory``."""

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock(START)

    @pytest.fixture
    def policy(self) -> QueuePolicy:
        return POLICY

    @pytest.fixture
    async def work_queue(
        self, work_queue_factory: WorkQueueFactory, clock: ManualClock, policy: QueuePolicy
    ) -> WorkQueue:
        return await work_queue_factory(clock, policy)

    @pytest.fixture
    def tenant(self) -> str:
        return unique("tenant")

    @pytest.fixture
    def queue_name(self) -> str:
        return unique("queue")


__all__ = ["POLICY", "START", "QueueFixtures", "WorkQueueFactory", "new_item", "unique"]
