"""durably.memory: every protocol over in-process dicts, for tests and single-process tools."""

from durably.memory.checkpointer import MemoryCheckpointer, MemoryEffect
from durably.memory.claimcheck import MemoryClaimCheckStore
from durably.memory.durable import MemoryDurable
from durably.memory.effects import MemoryEffectKit
from durably.memory.queue import MemoryWorkQueue
from durably.memory.scheduler import MemoryScheduler
from durably.memory.state import MemoryStateStore

__all__ = [
    "MemoryCheckpointer",
    "MemoryClaimCheckStore",
    "MemoryDurable",
    "MemoryEffect",
    "MemoryEffectKit",
    "MemoryScheduler",
    "MemoryStateStore",
    "MemoryWorkQueue",
]
