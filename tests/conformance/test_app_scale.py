"""The App over PostgreSQL behind PgBouncer in transaction pooling mode: the whole
`AppConformance` waking on a direct listening connection (``?listen=``), and its basics
waking by polling (no listening connection; every wait costs up to a poll interval).

The whole suite over a 3-master Redis Cluster opened from a ``redis+cluster://`` DSN is in
``tests/conformance/test_app.py`` beside the other backings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from durably.app import App
from durably.clock import Clock
from durably.testing.app import AppConformance, AppFactory
from durably.testing.app.basics import AppBasics
from tests.pg_service import create_database
from tests.pgbouncer_service import through_pgbouncer

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


class TestPgBouncerApp(AppConformance):
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
