"""Every store of every backing closes alike (idempotently), and the schedulers agree on
their defaults and on what ``namespace`` means."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from durably.claimcheck.store import ClaimCheckStore
from durably.memory import (
    MemoryCheckpointer,
    MemoryClaimCheckStore,
    MemoryDurable,
    MemoryScheduler,
    MemoryStateStore,
    MemoryWorkQueue,
)
from durably.postgres import (
    PostgresCheckpointer,
    PostgresClaimCheckStore,
    PostgresDurable,
    PostgresScheduler,
    PostgresStateStore,
    PostgresWorkQueue,
)
from durably.redis import (
    RedisCheckpointer,
    RedisClaimCheckStore,
    RedisDurable,
    RedisScheduler,
    RedisStateStore,
    RedisStoreSettings,
    RedisWorkQueue,
)
from durably.sqlite import (
    SqliteCheckpointer,
    SqliteClaimCheckStore,
    SqliteDurable,
    SqliteScheduler,
    SqliteStateStore,
    SqliteWorkQueue,
    connect,
)
from durably.stores.runs import StateStore
from durably.stores.work import WorkQueue
from durably.stores.workflows import (
    DEFAULT_LEASE,
    DEFAULT_NAMESPACE,
    Checkpointer,
    Durable,
    Scheduler,
)
from tests.pg_service import Stores, pg_driver, pg_pool, pg_stores, postgres_dsn
from tests.redis_service import namespace_for, redis_client, redis_server

__all__ = ["pg_driver", "pg_pool", "pg_stores", "postgres_dsn", "redis_client", "redis_server"]

_PROTOCOLS = (StateStore, WorkQueue, Checkpointer, Scheduler, Durable, ClaimCheckStore)


async def _close_each_twice(stores: list[Any]) -> None:
    for store in stores:
        assert isinstance(store, _PROTOCOLS), type(store).__name__
        await store.close()
        await store.close()


async def test_every_memory_store_closes_idempotently() -> None:
    checkpointer, scheduler = MemoryCheckpointer(), MemoryScheduler()
    await _close_each_twice(
        [
            MemoryStateStore(),
            MemoryWorkQueue(),
            checkpointer,
            scheduler,
            MemoryDurable(checkpointer, scheduler),
            MemoryClaimCheckStore(),
        ]
    )


async def test_every_sqlite_store_closes_idempotently_and_leaves_the_database_open(
    tmp_path: Path,
) -> None:
    async with await connect(tmp_path / "lifecycle.db") as database:
        checkpointer, scheduler = SqliteCheckpointer(database), SqliteScheduler(database)
        await scheduler.next_ready(0.01)
        await _close_each_twice(
            [
                SqliteStateStore(database),
                SqliteWorkQueue(database),
                checkpointer,
                scheduler,
                SqliteDurable(checkpointer, scheduler),
                SqliteClaimCheckStore(database),
            ]
        )
        assert not database.closed


@pytest.mark.postgres
async def test_every_postgres_store_closes_idempotently(pg_stores: Stores) -> None:
    tables = await pg_stores.tables()
    pool = pg_stores.pool
    checkpointer = PostgresCheckpointer(pool, tables=tables)
    scheduler = PostgresScheduler(pool, tables=tables)
    queue = PostgresWorkQueue(pool, tables=tables)
    await scheduler.next_ready(0.01)  # starts the listening connection
    await _close_each_twice(
        [
            PostgresStateStore(pool, tables=tables),
            queue,
            checkpointer,
            scheduler,
            PostgresDurable(checkpointer, scheduler),
            PostgresClaimCheckStore(pool, tables=tables),
        ]
    )


async def test_every_redis_store_closes_idempotently(redis_client: Any) -> None:
    prefix = namespace_for(redis_client)
    checkpointer = RedisCheckpointer(redis_client, key_prefix=prefix)
    scheduler = RedisScheduler(redis_client, key_prefix=prefix)
    await _close_each_twice(
        [
            RedisStateStore(redis_client, key_prefix=prefix),
            RedisWorkQueue(redis_client, key_prefix=prefix),
            checkpointer,
            scheduler,
            RedisDurable(checkpointer, scheduler),
            RedisClaimCheckStore(redis_client, key_prefix=prefix),
        ]
    )
    assert await redis_client.ping()


@pytest.mark.postgres
async def test_the_schedulers_construct_with_the_same_defaults(
    tmp_path: Path, pg_stores: Stores, redis_client: Any
) -> None:
    async with await connect(tmp_path / "defaults.db") as database:
        schedulers: list[Scheduler] = [
            MemoryScheduler(),
            SqliteScheduler(database),
            PostgresScheduler(pg_stores.pool),
            RedisScheduler(redis_client),
        ]
        for scheduler in schedulers:
            assert scheduler.lease == DEFAULT_LEASE == 30.0
            assert scheduler.namespace == DEFAULT_NAMESPACE == "default"
            await scheduler.close()


async def test_the_redis_key_prefix_is_key_prefix_everywhere_and_the_old_keywords_still_work(
    redis_client: Any,
) -> None:
    prefix = namespace_for(redis_client)
    checkpointer = RedisCheckpointer(redis_client, key_prefix=prefix)
    assert checkpointer.key_prefix == prefix
    with pytest.warns(DeprecationWarning, match="key_prefix"):
        old = RedisCheckpointer(redis_client, namespace=prefix)
    assert old.key_prefix == prefix
    with pytest.warns(DeprecationWarning, match="key_prefix"):
        RedisScheduler(redis_client, key_namespace=prefix)
    kind = RedisScheduler(redis_client, namespace="orders", key_prefix=prefix)
    assert kind.namespace == "orders"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings = RedisStoreSettings(dsn=SecretStr("redis://x"), namespace="legacy")
    assert settings.key_prefix == "legacy"
    assert RedisStoreSettings(dsn=SecretStr("redis://x"), key_prefix="new").key_prefix == "new"
