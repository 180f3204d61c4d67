"""An App (or `open_stores`) over a DSN refuses a PostgreSQL or Redis server that may lose
what it acknowledged, as the stores' own ``open()`` does, unless the DSN says
``?durable=false``; the option never reaches the driver."""

from __future__ import annotations

import pytest

import durably
from durably.errors import ConfigurationError, DsnError
from durably.stores.dsn import parse
from tests.pg_service import create_database
from tests.redis_service import start_server


def test_the_durable_option_is_read_and_taken_out_of_the_url() -> None:
    assert parse("redis://127.0.0.1:6379/0").durable
    off = parse("redis://127.0.0.1:6379/0?durable=false&socket_timeout=5")
    assert not off.durable
    assert off.url.get_secret_value() == "redis://127.0.0.1:6379/0?socket_timeout=5"
    assert parse("postgresql://root@h/db?durable=TRUE").durable
    on = parse("postgresql://root@h/db?durable=False")
    assert on.url.get_secret_value() == "postgresql://root@h/db"
    with pytest.raises(DsnError, match="durable= option"):
        parse("redis://127.0.0.1:6379/0?durable=maybe")


async def _start_one(dsn: str) -> str:
    app = durably.App(dsn, clock=durably.ManualClock())

    @app.workflow(name="one")
    async def one(ctx: durably.Context) -> int:
        return 1

    try:
        handle = await one.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 1
        return handle.id
    finally:
        await app.close()


async def test_an_app_refuses_a_redis_server_without_persistence() -> None:
    server = start_server("--appendonly", "no", "--save", "")
    with pytest.raises(ConfigurationError, match=r"persistence is off.*\?durable=false"):
        await _start_one(server.url)
    assert await _start_one(f"{server.url}?durable=false")


async def test_an_app_refuses_a_postgres_database_whose_commits_are_not_synchronous() -> None:
    dsn = create_database("synchronous_commit = off")
    with pytest.raises(ConfigurationError, match=r"synchronous_commit.*\?durable=false"):
        await _start_one(dsn)
    assert await _start_one(f"{dsn}?durable=false")
