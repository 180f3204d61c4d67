"""durably: agent runs, work queues and workflows that survive crashes, deploys and restarts.

The core imports no datastore driver; backings live in `durably.memory`, `durably.sqlite`,
`durably.postgres` and `durably.redis`.
"""

from durably.clock import Clock, ManualClock, SystemClock
from durably.codec import CheckpointCodec, JsonCodec
from durably.runs import (
    RunRecord,
    RunState,
    SessionRecord,
    StateDelta,
    StateKey,
    StatePage,
    StateQuery,
    StateStore,
    ToolCall,
    Usage,
)
from durably.runtime import Run, advance, resume
from durably.status import WorkflowInfo, WorkflowStatus
from durably.stores import Stores, open_stores
from durably.work import QueuePolicy, QueueStats, WorkItem, WorkPriority, WorkQueue, WorkState
from durably.worker import Worker, start_workflow
from durably.workflows import (
    Blocked,
    Checkpointer,
    Completed,
    Delivery,
    Durable,
    Entry,
    Pass,
    Recorded,
    Scheduler,
    Sleeping,
    SplitDurable,
    Written,
)

__version__ = "0.1.0"

__all__ = [
    "Blocked",
    "CheckpointCodec",
    "Checkpointer",
    "Clock",
    "Completed",
    "Delivery",
    "Durable",
    "Entry",
    "JsonCodec",
    "ManualClock",
    "Pass",
    "QueuePolicy",
    "QueueStats",
    "Recorded",
    "Run",
    "RunRecord",
    "RunState",
    "Scheduler",
    "SessionRecord",
    "Sleeping",
    "SplitDurable",
    "StateDelta",
    "StateKey",
    "StatePage",
    "StateQuery",
    "StateStore",
    "Stores",
    "SystemClock",
    "ToolCall",
    "Usage",
    "WorkItem",
    "WorkPriority",
    "WorkQueue",
    "WorkState",
    "Worker",
    "WorkflowInfo",
    "WorkflowStatus",
    "Written",
    "advance",
    "open_stores",
    "resume",
    "start_workflow",
]
