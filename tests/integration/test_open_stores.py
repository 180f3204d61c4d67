"""`durably.open_stores`: one DSN opens every store of its backing, on every backing, and
a DSN that cannot be used is a typed error that never shows its password."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from pydantic import SecretStr

import durably
from durably import RunRecord, StateKey, WorkItem
from durably.errors import ConfigurationError, DsnError, StoreUnavailableError
from tests.pg_service import postgres_dsn
from tests.redis_service import durable_server

__all__ = ["postgres_dsn"]

PASSWORD = "s3cret-Pw"


def _with_driver(dsn: str, driver: str) -> str:
    return dsn.replace("postgresql://", f"postgresql+{driver}://", 1)


@pytest.fixture(params=["memory", "sqlite", "postgresql", "postgresql+asyncpg", "redis"])
def any_dsn(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    kind = request.param
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'app.db'}"
    if kind == "redis":
        return durable_server().url
    dsn: str = request.getfixturevalue("postgres_dsn")
    return _with_driver(dsn, "asyncpg") if kind.endswith("asyncpg") else dsn


async def test_open_stores_opens_every_store_of_the_backing_a_dsn_names(any_dsn: str) -> None:
    stores = await durably.open_stores(any_dsn)
    try:
        await stores.migrate()
        assert stores.backing == any_dsn.split("://")[0].split("+")[0]
        assert "@" not in stores.location
        run = RunRecord(run_id=f"r-{time.monotonic_ns()}", tenant="acme", agent_name="a")
        await stores.state.put_run(run)
        got = await stores.state.get_run(StateKey(tenant="acme", id=run.run_id))
        assert got is not None
        assert got.agent_name == "a"
        queue = f"q-{time.monotonic_ns()}"
        await stores.queue.enqueue(WorkItem(id=queue, tenant="acme", queue=queue))
        claimed = await stores.queue.claim(worker="w", queue=queue)
        assert claimed is not None
        assert claimed.id == queue
        assert stores.durable("greeter") is not None
    finally:
        await stores.close()
    await stores.close()  # idempotent


@pytest.mark.parametrize(
    "dsn",
    [
        "",
        "app.db",
        "mysql://u:s3cret-Pw@db/app",
        "postgresql+pg8000://u:s3cret-Pw@db/app",
        "redis+x://u:s3cret-Pw@db/0",
        f"postgresql://u:{PASSWORD}@[::1/app",
        f"redis://u:{PASSWORD}@host:port/0",
        "sqlite://relative.db",
        # Read by the client, not by durably's parser; port 1 would refuse a connection.
        f"redis://u:{PASSWORD}@127.0.0.1:1/0?socket_timeout=abc",
    ],
)
async def test_a_malformed_dsn_is_a_dsn_error_that_does_not_show_it(dsn: str) -> None:
    with pytest.raises(DsnError) as caught:
        await durably.open_stores(dsn)
    assert isinstance(caught.value, ConfigurationError)
    assert PASSWORD not in str(caught.value)


def test_redis_settings_refuse_an_unreadable_query_option_as_a_dsn_error() -> None:
    from durably.redis import RedisStoreSettings

    dsn = f"redis://u:{PASSWORD}@127.0.0.1:1/0?max_connections=lots"
    with pytest.raises(DsnError, match="max_connections") as caught:
        RedisStoreSettings(dsn=SecretStr(dsn)).client()
    assert PASSWORD not in str(caught.value)


async def test_a_sqlite_file_that_does_not_exist_is_refused_unless_create(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(ConfigurationError, match="no such database"):
        await durably.open_stores(f"sqlite:///{path}", create=False)
    assert not path.exists()
    stores = await durably.open_stores(f"sqlite:///{path}")
    await stores.close()
    assert path.exists()


def _other_database(dsn: str, *, password: str) -> str:
    parts = urlsplit(dsn)
    netloc = f"{parts.username or 'root'}:{password}@{parts.hostname}:{parts.port or 5432}"
    return urlunsplit(parts._replace(netloc=netloc, path="/durably_no_such_database"))


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
async def test_a_postgres_database_that_does_not_exist_is_reported_at_once(
    postgres_dsn: str, driver: str
) -> None:
    dsn = _with_driver(_other_database(postgres_dsn, password=PASSWORD), driver)
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as caught:
        await durably.open_stores(dsn)
    assert time.monotonic() - started < 3.0  # the pool's retries took 5.5 s
    assert 'database "durably_no_such_database" does not exist' in str(caught.value)
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize(
    "make_dsn",
    [
        lambda: f"postgresql://root:{PASSWORD}@127.0.0.1:1/app",
        lambda: f"postgresql+asyncpg://root:{PASSWORD}@127.0.0.1:1/app",
        lambda: f"redis://default:{PASSWORD}@127.0.0.1:1/0",
    ],
    ids=["psycopg", "asyncpg", "redis"],
)
async def test_a_server_that_cannot_be_reached_is_store_unavailable(
    make_dsn: Callable[[], str],
) -> None:
    with pytest.raises(StoreUnavailableError) as caught:
        await durably.open_stores(make_dsn())
    assert caught.value.retryable
    assert PASSWORD not in str(caught.value)


def test_a_server_that_is_shutting_down_is_unavailable_not_misconfigured() -> None:
    from durably.postgres.failures import connect_error

    class FakeServerRefusal(Exception):  # psycopg's shape: no SQLSTATE, the server's words
        __module__ = "psycopg"

    said = (
        'connection failed: connection to server at "127.0.0.1", port 5432 failed: '
        f"FATAL:  the database system is shutting down ({PASSWORD})"
    )
    error = connect_error(FakeServerRefusal(said), f"postgresql://u:{PASSWORD}@h/db")
    assert isinstance(error, StoreUnavailableError)
    assert "shutting down" in str(error)
    assert PASSWORD not in str(error)


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
async def test_closing_the_stores_closes_their_durables_listeners_quietly(
    postgres_dsn: str, driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    stores = await durably.open_stores(_with_driver(postgres_dsn, driver))
    await stores.migrate()
    made = stores.durable("greeter")
    listener = made.scheduler.listener  # type: ignore[attr-defined]
    assert await listener.ready()
    with caplog.at_level(logging.WARNING, logger="durably"):
        await stores.close()
        await asyncio.sleep(0.1)  # a listener that outlived its pool would notice now
    assert not listener.connected
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
