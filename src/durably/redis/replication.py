"""Waiting for replicas before a write is acknowledged (``RedisStoreSettings.replicas``).

Redis replicates asynchronously: a primary that fails before its replicas copied a write
loses it on promotion. With ``replicas`` set, every script that writes is followed, on the
same connection and in the same round trip, by ``WAIT replicas timeout``, and a write fewer
replicas acknowledged in time raises `ReplicationTimeoutError`. Redis 7.2's ``WAITAOF``
(replicas' AOF fsynced too) is not used: WAIT is what every supported server has.
"""

from __future__ import annotations

from typing import Any

from durably.errors import ReplicationTimeoutError
from durably.redis.scripts import read_only


class ReplicaWait:
    """A redis-py client whose write scripts wait for ``replicas`` to acknowledge them
    (``timeout_seconds`` at most). Everything else is the wrapped client's."""

    def __init__(self, client: Any, replicas: int, timeout_seconds: float) -> None:
        self.client = client
        self.replicas = replicas
        self.timeout_seconds = timeout_seconds
        self._timeout_ms = max(1, round(timeout_seconds * 1000))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """``args`` as the client would run them; a write script then waits for replicas."""
        if args[0] not in ("EVALSHA", "EVAL") or read_only(args[1]):
            return await self.client.execute_command(*args, **options)
        # One connection for both: WAIT counts the writes of the connection it runs on.
        pipe = self.client.pipeline(transaction=False)
        pipe.execute_command(*args, **options)
        pipe.execute_command("WAIT", self.replicas, self._timeout_ms)
        reply, acknowledged = await pipe.execute(raise_on_error=False)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(acknowledged, Exception):
            raise acknowledged
        if int(acknowledged) < self.replicas:
            raise ReplicationTimeoutError(
                "redis", self.replicas, int(acknowledged), self.timeout_seconds
            )
        return reply


__all__ = ["ReplicaWait"]
