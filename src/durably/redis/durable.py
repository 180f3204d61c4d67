"""`RedisDurable`: a `RedisCheckpointer` and a `RedisScheduler`, composed by `SplitDurable`.

Weaker than `PostgresDurable`: the record and the wakeup live in different hash slots, so
they are two steps (record first, then queue). A crash between them leaves a record with
no wakeup; asking again repairs an `arrive`, while a repeated `deliver` appends a second
message. Redis has no transactional outbox across slots; see docs/redis.md.
"""

from __future__ import annotations

from durably.redis.checkpointer import RedisCheckpointer
from durably.redis.effects import LuaEffect
from durably.redis.scheduler import RedisScheduler
from durably.stores.workflows import SplitDurable


class RedisDurable(SplitDurable[LuaEffect]):
    """`Durable` over Redis: records first, then the wakeup (not one atomic step)."""

    def __init__(self, checkpointer: RedisCheckpointer, scheduler: RedisScheduler) -> None:
        super().__init__(checkpointer, scheduler)
        self._ready = scheduler
        # A workflow a gate admits is made ready by the step after the one freeing its slot.
        checkpointer._wake_in(scheduler.namespace, self._wake)

    async def _wake(self, workflow: str, tenant: str, absent: bool, priority: int | None) -> bool:
        if absent:
            return await self._ready.make_ready_if_absent(workflow, tenant=tenant)
        await self._ready.make_ready(workflow, tenant=tenant, priority=priority)
        return True


__all__ = ["RedisDurable"]
