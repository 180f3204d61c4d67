"""Fixtures for the PostgreSQL integration tests (database created by `tests.pg_service`)."""

from tests.pg_service import effect_kit, pg_driver, pg_pool, pg_stores, postgres_dsn

__all__ = ["effect_kit", "pg_driver", "pg_pool", "pg_stores", "postgres_dsn"]
