"""The App out of one machine: over a 3-master Redis Cluster opened from a
``redis+cluster://`` DSN, and over PostgreSQL behind PgBouncer in transaction pooling mode,
waking on a direct listening connection (``?listen=``) or, with none, by polling.

`make test` runs the basics and tenants here (the App's code is the same
over every store; what differs is how the store is reached); the whole `AppConformance`
over each (some 190 cases, minutes on a shared machine) runs with
``DURABLY_SCALE_FULL=1 pytest tests/conformance/test_app_scale.py``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from durably.app import App
from durably.clock import Clock
from durably.testing.app import AppConformance, AppFactory
from durably.testing.app.basics import AppBasics
from durably.testing.app.tenants import AppTenants
from tests.pg_service import create_database
from tests.pgbouncer_service import through_pgbouncer
from tests.redis_service import cluster_servers

pytestmark = pytest.mark.timeout(120)


async def _apps(dsn: str) -> AsyncIterator[AppFactory]:
    made: list[App] = []

    async def make(clock: Clock, **options: Any) -> App:
        app = App(dsn, clock=clock, migrate=False, **options)
        await app.stores()
        made.append(app)
        return app

    try:
        yield make
    finally:
        for app in made:
            await app.close()


def cluster_dsn() -> str:
    """The shared test cluster as a durably DSN (every master named)."""
    nodes = ",".join(f"127.0.0.1:{node.port}" for node in cluster_servers())
    return f"redis+cluster://{nodes}/"


FULL = os.environ.get("DURABLY_SCALE_FULL") == "1"
# What `make test` runs over each: the whole suite with DURABLY_SCALE_FULL=1.
Suite: type = AppConformance if FULL else type("Suite", (AppBasics, AppTenants), {})


class TestRedisClusterApp(Suite):  # type: ignore[misc]
    # The message cases run smaller (each send is a hop to the master of its slot).
    messages_sent = 2_000
    messages_consumed = 2_000

    @pytest.fixture
    async def app_factory(self) -> AsyncIterator[AppFactory]:
        async for factory in _apps(cluster_dsn()):
            yield factory


_DIRECT: dict[str, str] = {}


async def pooled_database() -> str:
    """A database (its direct DSN) migrated over a direct connection, whose sessions have
    a statement_timeout set on the server: PgBouncer refuses it as a startup option."""
    if "dsn" not in _DIRECT:
        direct = create_database("statement_timeout = 30000")
        app = App(direct, migrate=True)
        try:
            await app.stores()
        finally:
            await app.close()
        _DIRECT["dsn"] = direct
    return _DIRECT["dsn"]


class TestPgBouncerApp(Suite):  # type: ignore[misc]
    # As on a direct PostgreSQL connection (tests/conformance/test_app.py): committed
    # sends and receives of a shared server, fewer of them.
    messages_sent = 2_000
    messages_consumed = 2_000

    @pytest.fixture
    async def app_factory(self) -> AsyncIterator[AppFactory]:
        dsn = through_pgbouncer(await pooled_database(), listen=True)
        async for factory in _apps(dsn):
            yield factory


class TestPgBouncerPollingApp(AppBasics):
    @pytest.fixture
    async def app_factory(self) -> AsyncIterator[AppFactory]:
        dsn = through_pgbouncer(await pooled_database())
        async for factory in _apps(dsn):
            yield factory
