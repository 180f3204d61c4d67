"""Fixtures for the flow-control tests: the PostgreSQL and Redis services."""

from tests.pg_service import pg_driver, pg_pool, pg_stores, postgres_dsn
from tests.redis_service import any_redis

__all__ = ["any_redis", "pg_driver", "pg_pool", "pg_stores", "postgres_dsn"]
