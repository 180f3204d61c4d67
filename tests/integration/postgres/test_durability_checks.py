"""`verify` refuses a database that acknowledges commits before they are on disk, unless the
settings say ``durable=False``. The setting is the database's own (``ALTER DATABASE ... SET
synchronous_commit = off``) on a database made for the test, as an operator would set it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from durably.errors import ConfigurationError
from durably.postgres import PostgresStoreSettings, PostgresWorkQueue, migrate, verify
from tests.pg_service import close_pool, create_database, open_pool

pytestmark = pytest.mark.postgres


@pytest.fixture(params=["psycopg", "asyncpg"])
async def lossy_pool(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, str]]:
    dsn = create_database("synchronous_commit = off")
    pool = await open_pool(str(request.param), dsn)
    await migrate(pool)
    yield pool, dsn
    await close_pool(pool)


async def test_verify_refuses_a_database_whose_commits_are_not_synchronous(
    lossy_pool: tuple[Any, str],
) -> None:
    pool, dsn = lossy_pool
    with pytest.raises(ConfigurationError, match="synchronous_commit"):
        await verify(pool)
    with pytest.raises(ConfigurationError, match="synchronous_commit"):
        await PostgresWorkQueue.open(pool, settings=PostgresStoreSettings(dsn=SecretStr(dsn)))


async def test_durable_false_accepts_a_database_whose_commits_are_not_synchronous(
    lossy_pool: tuple[Any, str],
) -> None:
    pool, dsn = lossy_pool
    await verify(pool, durable=False)
    settings = PostgresStoreSettings(dsn=SecretStr(dsn), durable=False)
    queue = await PostgresWorkQueue.open(pool, settings=settings)
    await queue.close()


async def test_verify_accepts_synchronous_commit_local() -> None:
    pool = await open_pool("psycopg", create_database("synchronous_commit = local"))
    try:
        await migrate(pool)
        await verify(pool)
    finally:
        await close_pool(pool)
