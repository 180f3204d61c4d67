"""A server out of connections (SQLSTATE 53300) is `PoolExhaustedError` at once, with the
server's words: never retried, never "unavailable" nor a configuration error. Tested with
a role the server allows one connection."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from pydantic import SecretStr

from durably.errors import PoolExhaustedError
from durably.postgres import PostgresStateStore, PostgresStoreSettings, StateTables, migrate
from durably.postgres.executor import database_for
from durably.postgres.settings import open_pool as open_durable_pool
from durably.stores.runs import StateKey
from tests.pg_service import close_pool, open_pool

pytestmark = pytest.mark.postgres

# A retry would sleep 0.5 s or more before its second try: a refusal faster than that was
# not retried.
SLOW_RETRIES = {"max_attempts": 5, "backoff_seconds": 1.0}


@pytest.fixture
async def one_connection_dsn(postgres_dsn: str) -> AsyncIterator[str]:
    """The test database's DSN for a fresh role that may hold one connection at a time."""
    role = f"durably_one_{uuid.uuid4().hex[:8]}"
    database = urlsplit(postgres_dsn).path.lstrip("/")
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 1')
        admin.execute(f'GRANT CREATE ON DATABASE "{database}" TO "{role}"')
    parts = urlsplit(postgres_dsn)
    yield urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
        )
        admin.execute(f'DROP OWNED BY "{role}" CASCADE')
        admin.execute(f'DROP ROLE "{role}"')


async def test_opening_a_pool_on_a_server_out_of_connections_is_pool_exhausted_at_once(
    one_connection_dsn: str, pg_driver: str
) -> None:
    holding = await psycopg.AsyncConnection.connect(one_connection_dsn)  # the one allowed
    try:
        settings = PostgresStoreSettings(dsn=SecretStr(one_connection_dsn), **SLOW_RETRIES)
        started = time.perf_counter()
        with pytest.raises(PoolExhaustedError) as refused:
            await open_durable_pool(settings, driver=pg_driver)
        assert time.perf_counter() - started < 0.5
        assert "too many connections for role" in str(refused.value)
        assert refused.value.retryable
    finally:
        await holding.close()


async def test_a_pool_the_server_will_not_grow_is_exhausted_with_the_servers_words(
    one_connection_dsn: str, pg_driver: str
) -> None:
    pool = await open_pool(pg_driver, one_connection_dsn, size=3)
    try:
        tables = StateTables(schema=f"t_{uuid.uuid4().hex[:16]}")
        await migrate(pool, tables)
        settings = PostgresStoreSettings(
            dsn=SecretStr("unused"), pool_timeout_seconds=0.3, **SLOW_RETRIES
        )
        store = PostgresStateStore(pool, settings=settings, tables=tables)
        async with database_for(pool).session(5.0):  # the role's one connection, busy
            started = time.perf_counter()
            with pytest.raises(PoolExhaustedError) as refused:
                await store.get_run(StateKey(tenant="t", id="r"))
            waited = time.perf_counter() - started
        assert refused.value.pool_size == 3
        if pg_driver == "asyncpg":
            # asyncpg connects in the caller's task: the server's refusal comes at once.
            assert waited < 0.3
            assert "too many connections for role" in str(refused.value)
        else:
            # psycopg's pool connects in the background and keeps trying: the caller waits
            # for a connection up to the pool's timeout, as for any busy pool.
            assert 0.3 <= waited < 0.5 + 0.3
        assert await store.get_run(StateKey(tenant="t", id="r")) is None
    finally:
        await close_pool(pool)
