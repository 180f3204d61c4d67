"""The services every lockstep machine drives: one PostgreSQL database and Redis server for
the run, wrapped in a `Services` (its own event loop) per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.model.lockstep import Services
from tests.pg_service import postgres_dsn
from tests.redis_service import RedisServer, redis_server

__all__ = ["postgres_dsn", "redis_server"]


@pytest.fixture(scope="module")
def services(postgres_dsn: str, redis_server: RedisServer) -> Iterator[Services]:
    opened = Services(postgres_dsn, redis_server.port)
    try:
        yield opened
    finally:
        opened.close()
