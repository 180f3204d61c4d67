"""Riding out a server that goes away for a few seconds with the default settings: a real
TCP proxy between the pool and the server cuts every connection and refuses new ones, for
longer than a pool waits for a connection."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from pydantic import SecretStr

from durably import WorkItem
from durably.postgres import PostgresStoreSettings, PostgresWorkQueue, StateTables, migrate
from tests.outage_proxy import OutageProxy
from tests.pg_service import close_pool, open_pool

pytestmark = pytest.mark.postgres


@pytest.fixture
async def behind_proxy(
    postgres_dsn: str, pg_driver: str
) -> AsyncIterator[tuple[Any, OutageProxy, str]]:
    parts = urlsplit(postgres_dsn)
    proxy = OutageProxy(parts.port or 5432)
    port = await proxy.start()
    proxied = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))
    pool = await open_pool(pg_driver, proxied, size=2)
    yield pool, proxy, proxied
    await close_pool(pool)
    await proxy.stop()


async def test_a_call_rides_out_a_server_gone_for_seconds_with_the_default_settings(
    behind_proxy: tuple[Any, OutageProxy, str],
) -> None:
    pool, proxy, dsn = behind_proxy
    tables = StateTables(schema=f"t_{uuid.uuid4().hex[:16]}")
    await migrate(pool, tables)
    queue = PostgresWorkQueue(
        pool, settings=PostgresStoreSettings(dsn=SecretStr(dsn)), tables=tables
    )
    await queue.enqueue(WorkItem(id="before", tenant="t"))
    # Longer than psycopg's pool waits for a connection (pool_timeout_seconds, 5 s).
    proxy.cut(6.0)
    enqueued = await queue.enqueue(WorkItem(id="during", tenant="t"))
    assert enqueued.id == "during"
    assert (await queue.stats()).depth == 2
