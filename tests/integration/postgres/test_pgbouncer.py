"""PostgreSQL behind Debian's PgBouncer in transaction pooling mode, started by the tests:
what the pooler refuses is never sent, `migrate` refuses to run through it, `verify` says
where statement_timeout belongs, waiters wake on the direct listening connection or by
polling, and `durably doctor` counts the connections."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from durably import WorkItem
from durably.cli import main
from durably.errors import ConfigurationError, DurablyError
from durably.stores import open_stores
from tests.pg_service import create_database
from tests.pgbouncer_service import through_pgbouncer

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

_DATABASES: dict[str, str] = {}


async def _database(timeout: bool = True) -> str:
    """A migrated database (direct DSN); its sessions have a statement_timeout when
    ``timeout`` (set on the database: the pooler refuses it at connect)."""
    key = str(timeout)
    if key not in _DATABASES:
        direct = create_database(*(["statement_timeout = 30000"] if timeout else []))
        stores = await open_stores(direct)
        try:
            await stores.migrate()
        finally:
            await stores.close()
        _DATABASES[key] = direct
    return _DATABASES[key]


async def test_without_the_pooler_flag_pgbouncer_refuses_the_startup_options() -> None:
    direct = await _database()
    plain = through_pgbouncer(direct).replace("pooler=transaction", "durable=true")
    with pytest.raises(DurablyError, match="options"):
        await open_stores(plain)


async def test_migrate_refuses_to_run_through_a_transaction_pooler() -> None:
    stores = await open_stores(through_pgbouncer(await _database()))
    try:
        with pytest.raises(ConfigurationError, match=r"transaction pooler.*durably migrate"):
            await stores.migrate()
        await stores.verify()  # what migrate refuses, verify still reads
    finally:
        await stores.close()


def test_the_migrate_command_refuses_through_the_pooler_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn = asyncio.run(_database())
    assert main(["migrate", "--dsn", through_pgbouncer(dsn)]) == 1
    assert "without ?pooler=transaction" in capsys.readouterr().err


async def test_verify_names_the_database_setting_when_the_server_has_no_statement_timeout() -> None:
    stores = await open_stores(through_pgbouncer(await _database(timeout=False)))
    try:
        with pytest.raises(ConfigurationError, match="ALTER DATABASE"):
            await stores.verify()
    finally:
        await stores.close()


async def _wake_latency(dsn: str, listens: bool) -> float:
    """Seconds from an enqueue to a waiting `wait_for_work` returning True."""
    stores = await open_stores(dsn)
    try:
        queue: Any = stores.queue  # a PostgresWorkQueue: its waits and its listener
        assert await queue.listener.ready(20.0) is listens
        queue_name = f"q{time.monotonic_ns()}"

        async def woken() -> None:
            # A wait may end early with False (each poll, without a listener): look again.
            while not await queue.wait_for_work(queue_name, within=10.0):
                pass

        waiting = asyncio.create_task(woken())
        await asyncio.sleep(0.3)  # the waiter has looked and is waiting
        started = time.monotonic()
        await queue.enqueue(WorkItem(id=queue_name, tenant="t", queue=queue_name))
        await asyncio.wait_for(waiting, 10.0)
        return time.monotonic() - started
    finally:
        await stores.close()


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
async def test_a_waiter_wakes_at_once_on_the_direct_listening_connection(driver: str) -> None:
    dsn = through_pgbouncer(await _database(), listen=True)
    dsn = dsn.replace("postgresql://", f"postgresql+{driver}://", 1)
    assert await _wake_latency(dsn, listens=True) < 0.5


async def test_without_a_listening_dsn_a_waiter_wakes_by_polling_within_its_period() -> None:
    dsn = through_pgbouncer(await _database())
    # No listener: the waiter looks again every poll_seconds (1 s).
    assert await _wake_latency(dsn, listens=False) < 1.0 + 1.5


def test_doctor_counts_the_direct_listener_and_reads_the_servers_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn = through_pgbouncer(asyncio.run(_database()), listen=True)
    assert main(["doctor", "--dsn", dsn, "--workers", "16"]) == 0
    out = capsys.readouterr().out
    assert "0 pooled + 1 listening = 1 server connections" in out
    assert "16 processes take 16 of " in out
    assert "listen=" not in out  # the DSN is never printed
    assert "pooler=" not in out
