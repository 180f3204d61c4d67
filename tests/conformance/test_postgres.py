"""All five conformance suites against the PostgreSQL backing, over psycopg and asyncpg,
each store on a fresh schema of tables in a database created for this run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from durably.claimcheck.store import ClaimCheckStore
from durably.clock import Clock
from durably.postgres import (
    PostgresCheckpointer,
    PostgresClaimCheckStore,
    PostgresDurable,
    PostgresScheduler,
    PostgresStateStore,
    PostgresWorkQueue,
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
from tests.pg_service import (
    Stores,
    effect_kit,
    pg_driver,
    pg_pool,
    postgres_dsn,
)

pytestmark = pytest.mark.postgres

__all__ = ["effect_kit", "pg_driver", "pg_pool", "postgres_dsn"]


@pytest.fixture
async def pg_stores(pg_pool: Any, pg_driver: str) -> AsyncIterator[Stores]:
    """Stores over sets of tables emptied for reuse (no case here changes a schema)."""
    stores = Stores(pg_pool, pg_driver, reuse=True)
    try:
        yield stores
    finally:
        await stores.close()


@pytest.fixture
def state_store_factory(pg_stores: Stores) -> StateStoreFactory:
    async def make(clock: Clock, scrub: Scrubber | None = None) -> StateStore:
        tables = await pg_stores.tables()
        return PostgresStateStore(pg_stores.pool, clock=clock, tables=tables, scrub=scrub)

    return make


@pytest.fixture
def work_queue_factory(pg_stores: Stores) -> WorkQueueFactory:
    async def make(clock: Clock, policy: QueuePolicy) -> WorkQueue:
        tables = await pg_stores.tables()
        queue = PostgresWorkQueue(pg_stores.pool, clock=clock, policy=policy, tables=tables)
        return pg_stores.track(queue)  # type: ignore[no-any-return]

    return make


@pytest.fixture
def checkpointer_factory(pg_stores: Stores) -> CheckpointerFactory:
    async def make() -> Checkpointer[Any]:
        return PostgresCheckpointer(pg_stores.pool, tables=await pg_stores.tables())

    return make


@pytest.fixture
def scheduler_factory(pg_stores: Stores) -> SchedulerFactory:
    async def make(lease: float) -> Scheduler:
        tables = await pg_stores.tables()
        scheduler = PostgresScheduler(pg_stores.pool, lease=lease, tables=tables)
        return pg_stores.track(scheduler)  # type: ignore[no-any-return]

    return make


@pytest.fixture
def durable_factory(pg_stores: Stores) -> DurableFactory:
    async def make() -> Durable[Any]:
        tables = await pg_stores.tables()
        scheduler = PostgresScheduler(pg_stores.pool, lease=30.0, tables=tables)
        pg_stores.track(scheduler)
        return PostgresDurable(PostgresCheckpointer(pg_stores.pool, tables=tables), scheduler)

    return make


class TestPostgresStateStore(StateStoreConformance):
    pass


class TestPostgresWorkQueue(WorkQueueConformance):
    pass


class TestPostgresCheckpointer(CheckpointerConformance):
    pass


class TestPostgresScheduler(SchedulerConformance):
    pass


class TestPostgresDurable(DurableConformance):
    pass


@pytest.fixture
def claim_store_factory(pg_stores: Stores) -> ClaimCheckStoreFactory:
    async def make(clock: Clock) -> ClaimCheckStore:
        tables = await pg_stores.tables()
        return PostgresClaimCheckStore(pg_stores.pool, clock=clock, tables=tables)

    return make


class TestPostgresClaimCheckStore(ClaimCheckStoreConformance):
    pass
