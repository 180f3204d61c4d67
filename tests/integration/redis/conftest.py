"""Fixtures for the Redis integration tests (servers started by `tests.redis_service`)."""

from tests.redis_service import (
    any_redis,
    redis_client,
    redis_cluster,
    redis_cluster_client,
    redis_server,
)

__all__ = ["any_redis", "redis_client", "redis_cluster", "redis_cluster_client", "redis_server"]
