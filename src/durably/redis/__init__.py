"""durably.redis: every protocol over Redis (redis-py asyncio), standalone or cluster.

Every guarded operation is one Lua script (in ``.lua`` files beside these modules) whose
keys share one hash slot. `open()` classmethods run `preflight`; constructors skip it.
"""

from durably.redis.checkpointer import LuaEffectError, RedisCheckpointer
from durably.redis.claimcheck import RedisClaimCheckStore
from durably.redis.durable import RedisDurable
from durably.redis.effects import LuaEffect, RedisEffectKit
from durably.redis.preflight import preflight
from durably.redis.queue import RedisWorkQueue
from durably.redis.scheduler import RedisScheduler
from durably.redis.settings import RedisStoreSettings
from durably.redis.state import RedisStateStore

__all__ = [
    "LuaEffect",
    "LuaEffectError",
    "RedisCheckpointer",
    "RedisClaimCheckStore",
    "RedisDurable",
    "RedisEffectKit",
    "RedisScheduler",
    "RedisStateStore",
    "RedisStoreSettings",
    "RedisWorkQueue",
    "preflight",
]
