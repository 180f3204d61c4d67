"""durably.testing: conformance suites every backing runs unchanged (subclass one per store)."""

from durably.testing.checkpointer import CheckpointerConformance
from durably.testing.claimcheck import ClaimCheckStoreConformance
from durably.testing.durable import DurableConformance
from durably.testing.queue import WorkQueueConformance
from durably.testing.scheduler import SchedulerConformance
from durably.testing.state import StateStoreConformance

__all__ = [
    "CheckpointerConformance",
    "ClaimCheckStoreConformance",
    "DurableConformance",
    "SchedulerConformance",
    "StateStoreConformance",
    "WorkQueueConformance",
]
