"""`PostgresStoreSettings`: the DSN (secret), the retry budget and the pool."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, PositiveFloat, SecretStr

from durably.postgres.failures import RetryBudget
from durably.settings import StoreSettings


class PostgresStoreSettings(StoreSettings):
    """Settings for the PostgreSQL backing; ``from_env()`` reads ``DURABLY_POSTGRES_DSN``.

    The DSN is a `SecretStr`: it never appears in a repr, a log line or an error.
    """

    env_var: ClassVar[str] = "DURABLY_POSTGRES_DSN"

    dsn: SecretStr
    pool_timeout_seconds: PositiveFloat = Field(
        5.0, description="wait for a free pooled connection before PoolExhaustedError"
    )
    statement_timeout_seconds: PositiveFloat = Field(
        30.0, description="set on connections made by open_pool(); verify() requires one"
    )
    poll_seconds: PositiveFloat = Field(
        1.0, description="fallback poll while waiting for work; LISTEN/NOTIFY wakes sooner"
    )

    @property
    def retry(self) -> RetryBudget:
        """The retry budget unbound calls apply."""
        return RetryBudget(
            max_attempts=self.max_attempts,
            backoff_seconds=self.backoff_seconds,
            pool_timeout_seconds=self.pool_timeout_seconds,
        )

    def pool_kwargs(self) -> dict[str, Any]:
        """Connection keyword arguments for psycopg: the timeouts, never logged."""
        timeout_ms = int(self.statement_timeout_seconds * 1000)
        return {
            "connect_timeout": max(1, int(self.connect_timeout_seconds)),
            "options": f"-c statement_timeout={timeout_ms}",
        }


async def open_pool(settings: PostgresStoreSettings) -> Any:
    """An open psycopg ``AsyncConnectionPool`` sized ``settings.pool_size``, whose
    connections carry ``statement_timeout``."""
    from psycopg_pool import AsyncConnectionPool

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        settings.dsn.get_secret_value(),
        min_size=1,
        max_size=settings.pool_size,
        kwargs=settings.pool_kwargs(),
        timeout=settings.pool_timeout_seconds,
        open=False,
    )
    await pool.open(wait=True, timeout=settings.connect_timeout_seconds)
    return pool


__all__ = ["PostgresStoreSettings", "open_pool"]
