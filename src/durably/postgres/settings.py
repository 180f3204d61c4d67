"""`PostgresStoreSettings`: the DSN (secret), the retry budget and the pool."""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr

from durably.errors import ConfigurationError, DsnError
from durably.postgres.failures import RetryBudget, connect_error
from durably.postgres.pooler import Pooled, mark_pooled
from durably.stores.dsn import scrub
from durably.stores.settings import PositiveFloat, ServerStoreSettings


class PostgresStoreSettings(ServerStoreSettings):
    """Settings for the PostgreSQL backing; ``from_env()`` reads ``DURABLY_POSTGRES_DSN``.

    The DSN is a `SecretStr`: it never appears in a repr, a log line or an error.
    """

    env_var: ClassVar[str] = "DURABLY_POSTGRES_DSN"

    dsn: SecretStr
    durable: bool = Field(
        True,
        description="verify() refuses synchronous_commit = off and fsync = off unless False",
    )
    pool_timeout_seconds: PositiveFloat = Field(
        5.0, description="wait for a free pooled connection before PoolExhaustedError"
    )
    statement_timeout_seconds: PositiveFloat = Field(
        30.0, description="set on connections made by open_pool(); verify() requires one"
    )
    poll_seconds: PositiveFloat = Field(
        1.0, description="fallback poll while waiting for work; LISTEN/NOTIFY wakes sooner"
    )
    pooler: Literal["transaction", "session"] | None = Field(
        None,
        description=(
            "the DSN names a pooler (PgBouncer): transaction pooling sends no startup "
            "options, prepares nothing, LISTENs only on listen_dsn and refuses migrate"
        ),
    )
    listen_dsn: SecretStr | None = Field(
        None, description="a direct DSN for the listening connection (behind a pooler)"
    )

    @property
    def transaction_pooled(self) -> bool:
        """Whether the DSN names a transaction pooler (no session state survives)."""
        return self.pooler == "transaction"

    @property
    def retry(self) -> RetryBudget:
        """The retry budget unbound calls apply."""
        return RetryBudget(
            max_attempts=self.max_attempts,
            backoff_seconds=self.backoff_seconds,
            budget_seconds=self.retry_budget_seconds,
            cap_seconds=self.backoff_cap_seconds,
            pool_timeout_seconds=self.pool_timeout_seconds,
            jitter=self.jitter,
        )

    def pool_kwargs(self) -> dict[str, Any]:
        """Connection keyword arguments for psycopg: the timeouts, never logged. Through a
        transaction pooler: no startup options (the pooler refuses them; the server's
        own statement_timeout applies) and no prepared statements (the next statement
        may run on another server connection)."""
        if self.transaction_pooled:
            return {
                "connect_timeout": max(1, int(self.connect_timeout_seconds)),
                "prepare_threshold": None,
            }
        return self.direct_kwargs()

    def direct_kwargs(self) -> dict[str, Any]:
        """Connection keyword arguments for a connection straight to the server."""
        timeout_ms = int(self.statement_timeout_seconds * 1000)
        return {
            "connect_timeout": max(1, int(self.connect_timeout_seconds)),
            "options": f"-c statement_timeout={timeout_ms}",
        }


async def open_pool(settings: PostgresStoreSettings, *, driver: str = "psycopg") -> Any:
    """An open pool sized ``settings.pool_size`` whose connections carry
    ``statement_timeout``: a psycopg ``AsyncConnectionPool``, or an asyncpg ``Pool`` with
    ``driver="asyncpg"``. A caller finding every connection busy waits up to
    ``pool_timeout_seconds`` for one.

    A DSN option libpq does not know is refused first (`DsnError`, psycopg only: asyncpg
    sends unknown options to the server as settings). The first connection is made once,
    before the pool, so a database that does not exist, a refused login or an unreachable
    server is reported at once (`ConfigurationError` for what the server refused,
    `StoreUnavailableError` otherwise) instead of after the pool's retries. Neither
    message, nor any line psycopg-pool logs, contains the DSN's password, and the DSN
    stays in ``settings`` (a `SecretStr`) until a driver call reads it.
    """
    if driver == "asyncpg":
        pooled = await _open_asyncpg(settings)
        _remember_pooler(pooled, settings)
        return pooled
    if driver != "psycopg":
        raise ConfigurationError(f"unknown PostgreSQL driver {driver!r}: psycopg or asyncpg")
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import AsyncConnectionPool

    try:
        conninfo_to_dict(settings.dsn.get_secret_value())  # parses only: no I/O
    except psycopg.ProgrammingError as refused:
        raise DsnError(f"malformed postgresql DSN: {scrub(str(refused), settings.dsn)}") from None
    scrub_pool_logs(settings.dsn)
    try:
        probe = await psycopg.AsyncConnection.connect(
            settings.dsn.get_secret_value(), **settings.pool_kwargs()
        )
    except Exception as error:
        raise connect_error(error, settings.dsn) from None
    await probe.close()
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        settings.dsn.get_secret_value(),
        min_size=1,
        max_size=settings.pool_size,
        kwargs=settings.pool_kwargs(),
        timeout=settings.pool_timeout_seconds,
        open=False,
    )
    await pool.open(wait=True, timeout=settings.connect_timeout_seconds)
    _remember_pooler(pool, settings)
    return pool


def _remember_pooler(pool: Any, settings: PostgresStoreSettings) -> None:
    """Record a pool opened through a transaction pooler, and how it listens."""
    if settings.transaction_pooled:
        if settings.listen_dsn is not None:
            scrub_pool_logs(settings.listen_dsn)
        mark_pooled(pool, Pooled(settings.listen_dsn, settings.direct_kwargs()))


async def _open_asyncpg(settings: PostgresStoreSettings) -> Any:
    import asyncpg

    timeout_ms = int(settings.statement_timeout_seconds * 1000)
    # Through a transaction pooler: no startup settings and no statement cache (asyncpg
    # prepares every statement it caches, by name, on one server connection).
    pooled: dict[str, Any] = {"statement_cache_size": 0}
    direct: dict[str, Any] = {"server_settings": {"statement_timeout": str(timeout_ms)}}
    try:
        return await asyncpg.create_pool(
            settings.dsn.get_secret_value(),
            min_size=1,
            max_size=settings.pool_size,
            timeout=settings.connect_timeout_seconds,
            **(pooled if settings.transaction_pooled else direct),
        )
    except Exception as error:
        raise connect_error(error, settings.dsn) from None


class _PoolLogScrubber(logging.Filter):
    """Takes the passwords of the DSNs pools were opened with out of psycopg-pool's log
    lines (it logs each failed connection attempt with the driver's message)."""

    def __init__(self) -> None:
        super().__init__()
        self.dsns: set[SecretStr] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        for dsn in self.dsns:
            message = scrub(message, dsn)
        record.msg, record.args = message, None
        return True


_POOL_LOGS = _PoolLogScrubber()


def scrub_pool_logs(dsn: str | SecretStr) -> None:
    """Scrub ``dsn``'s secrets from psycopg-pool's log records from now on."""
    _POOL_LOGS.dsns.add(dsn if isinstance(dsn, SecretStr) else SecretStr(dsn))
    pool_logger = logging.getLogger("psycopg.pool")
    if _POOL_LOGS not in pool_logger.filters:
        pool_logger.addFilter(_POOL_LOGS)


__all__ = ["PostgresStoreSettings", "open_pool", "scrub_pool_logs"]
