"""durably.testing: the replay tester, and conformance suites every backing runs unchanged.

`replay` checks the code about to ship against stored workflow histories (see
`in_flight_histories`); the suites are pytest base classes, subclassed once per store.
"""

from durably.testing.checkpointer import CheckpointerConformance
from durably.testing.claimcheck import ClaimCheckStoreConformance
from durably.testing.durable import DurableConformance
from durably.testing.queue import WorkQueueConformance
from durably.testing.replay import (
    Finding,
    History,
    ReplayReport,
    WorkflowReplay,
    assert_replays,
    histories_from_files,
    histories_from_store,
    in_flight_histories,
    replay,
)
from durably.testing.scheduler import SchedulerConformance
from durably.testing.state import StateStoreConformance

__all__ = [
    "CheckpointerConformance",
    "ClaimCheckStoreConformance",
    "DurableConformance",
    "Finding",
    "History",
    "ReplayReport",
    "SchedulerConformance",
    "StateStoreConformance",
    "WorkQueueConformance",
    "WorkflowReplay",
    "assert_replays",
    "histories_from_files",
    "histories_from_store",
    "in_flight_histories",
    "replay",
]
