"""durably.testing: conformance suites every backing runs unchanged (subclass one per store)."""

from durably.testing.checkpointer import CheckpointerConformance
from durably.testing.state import StateStoreConformance

__all__ = [
    "CheckpointerConformance",
    "StateStoreConformance",
]
