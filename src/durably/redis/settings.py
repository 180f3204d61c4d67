"""`RedisStoreSettings`: where the server is and how hard to try (the DSN stays secret)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import (
    AliasChoices,
    Field,
    NonNegativeInt,
    SecretStr,
    field_validator,
    model_validator,
)

from durably.errors import DsnError
from durably.redis.keys import DEFAULT_KEY_PREFIX, valid_key_prefix
from durably.stores.dsn import scrub
from durably.stores.settings import PositiveFloat, PositiveInt, ServerStoreSettings

DEFAULT_MAX_VALUE_BYTES = 256 * 1024
"""Redis holds everything in memory: a smaller limit than the SQL stores."""


class RedisStoreSettings(ServerStoreSettings):
    """Settings of the Redis backing; read ``DURABLY_REDIS_DSN`` with `from_env`.

    ``durable=False`` accepts a server without persistence (dev, or work that can be
    recreated elsewhere); ``key_prefix`` (formerly ``namespace``, still accepted) starts
    every key and shards queues. ``replicas``
    makes each write wait until that many replicas have it (``WAIT``), so a failover to
    one of them keeps every acknowledged write; `ReplicationTimeoutError` when they do not
    acknowledge within ``replica_timeout_seconds``. Not with ``cluster``.
    """

    env_var: ClassVar[str] = "DURABLY_REDIS_DSN"

    dsn: SecretStr
    durable: bool = True
    key_prefix: str = Field(
        DEFAULT_KEY_PREFIX, validation_alias=AliasChoices("key_prefix", "namespace")
    )
    cluster: bool = Field(False, description="connect with a cluster-aware client")
    cluster_nodes: tuple[str, ...] = Field(
        (),
        description="more cluster nodes to start from, as host:port (the DSN's host first)",
    )
    max_value_bytes: PositiveInt = DEFAULT_MAX_VALUE_BYTES
    replicas: NonNegativeInt = Field(
        0,
        description="replicas that must acknowledge each write (WAIT) before it returns",
    )
    replica_timeout_seconds: PositiveFloat = Field(
        1.0, description="how long a write waits for them, then ReplicationTimeoutError"
    )
    pool_timeout_seconds: PositiveFloat = Field(
        5.0, description="wait for a free pooled connection before PoolExhaustedError"
    )

    @model_validator(mode="after")
    def _replicas_standalone(self) -> RedisStoreSettings:
        if self.replicas and self.cluster:
            raise ValueError("replicas (WAIT after each write) needs a standalone primary")
        return self

    @field_validator("key_prefix")
    @classmethod
    def _valid_namespace(cls, value: str) -> str:
        return valid_key_prefix(value)

    def client(self, **options: Any) -> Any:
        """A redis-py asyncio client for ``dsn`` (a `RedisCluster` when ``cluster``).

        Up to ``pool_size`` connections (on a cluster: calls in flight at once, so at most
        that many connections to each node); a call finding them all busy waits up to
        ``pool_timeout_seconds`` for one, then raises `PoolExhaustedError`. The client
        itself retries nothing: durably's stores wait out a failover with their own bounded budget
        (``max_attempts``, ``backoff_seconds``), and two layers of retries would multiply
        the wait. Nothing is sent yet: a DSN option the client does not take is refused
        here (`DsnError`), before any I/O.
        """
        from redis.asyncio import Redis
        from redis.asyncio.cluster import ClusterNode
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        from durably.redis.cluster import WaitingCluster
        from durably.redis.pool import WaitingPool, unknown_options

        common: dict[str, Any] = {
            "socket_connect_timeout": self.connect_timeout_seconds,
            "max_connections": self.pool_size,
            "retry": Retry(NoBackoff(), 0),
            **options,
        }
        # The URL is read from the secret in each driver call, never kept in a local.
        try:
            if self.cluster:
                nodes = [ClusterNode(*_host_port(node)) for node in self.cluster_nodes]
                return WaitingCluster.from_url(
                    self.dsn.get_secret_value(),
                    pool_timeout=self.pool_timeout_seconds,
                    **({"startup_nodes": nodes} if nodes else {}),
                    **common,
                )
            pool = WaitingPool.from_url(
                self.dsn.get_secret_value(), timeout=self.pool_timeout_seconds, **common
            )
        except ValueError as exc:  # a query option's value the client cannot read
            raise DsnError(f"malformed redis DSN: {scrub(str(exc), self.dsn)}") from None
        unknown = unknown_options(pool)
        if unknown:
            raise DsnError(f"malformed redis DSN: the client takes no option {', '.join(unknown)}")
        return Redis.from_pool(pool)


def _host_port(node: str) -> tuple[str, int]:
    host, _, port = node.rpartition(":")
    return host, int(port)


__all__ = ["RedisStoreSettings"]
