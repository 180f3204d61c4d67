"""durably.memory: every protocol over in-process dicts, for tests and single-process tools."""

from durably.memory.state import MemoryStateStore

__all__ = [
    "MemoryStateStore",
]
