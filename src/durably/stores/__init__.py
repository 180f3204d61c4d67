"""durably.stores: the contracts every backing implements, and `open_stores`.

A backing (`durably.memory`, `durably.sqlite`, `durably.postgres`, `durably.redis`) imports
only these contracts and the shared modules (`durably.errors`, `durably.clock`,
`durably.validation`, `durably.redaction`); `open_stores` imports a backing only when a DSN
names it.
"""

from durably.stores.codec import CheckpointCodec, JsonCodec
from durably.stores.flow import Throttle
from durably.stores.opening import Stores, open_stores
from durably.stores.runs import (
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
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.work import (
    DeadLetterPage,
    QueuePolicy,
    QueueStats,
    WorkItem,
    WorkPriority,
    WorkQueue,
    WorkState,
)
from durably.stores.workflows import (
    Blocked,
    Checkpointer,
    Completed,
    Delivery,
    Durable,
    Entry,
    Finish,
    Pass,
    Recorded,
    Restart,
    Scheduler,
    Sleeping,
    SplitDurable,
    Written,
)

__all__ = [
    "Blocked",
    "CheckpointCodec",
    "Checkpointer",
    "Completed",
    "DeadLetterPage",
    "Delivery",
    "Durable",
    "Entry",
    "Finish",
    "JsonCodec",
    "Pass",
    "QueuePolicy",
    "QueueStats",
    "Recorded",
    "Restart",
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
    "Throttle",
    "ToolCall",
    "Usage",
    "WorkItem",
    "WorkPriority",
    "WorkQueue",
    "WorkState",
    "WorkflowInfo",
    "WorkflowStatus",
    "Written",
    "open_stores",
]
