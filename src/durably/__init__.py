"""durably: agent runs, work queues and workflows that survive crashes, deploys and restarts.

The core imports no datastore driver; backings live in `durably.memory`, `durably.sqlite`,
`durably.postgres` and `durably.redis`.
"""

from durably.app import (
    App,
    Context,
    Retry,
    Step,
    StepContext,
    Topic,
    Workflow,
    WorkflowHandle,
    context,
)
from durably.claimcheck import ClaimCheckStore
from durably.claimchecked import ClaimCheckedCheckpointer, ClaimCheckedDurable, ClaimCheckedQueue
from durably.claimpolicy import ClaimCheckPolicy
from durably.clock import Clock, ManualClock, SystemClock
from durably.codec import CheckpointCodec, JsonCodec
from durably.errors import (
    ChildWorkflowFailedError,
    IncompatibleRecordError,
    NondeterminismError,
    NonRetryable,
    StepFailedError,
    StepResultError,
    StepTimeoutError,
    WorkflowCancelledError,
    WorkflowConflictError,
    WorkflowFailedError,
    WorkflowFinishedError,
    WorkflowNotFoundError,
)
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
    Finish,
    Pass,
    Recorded,
    Scheduler,
    Sleeping,
    SplitDurable,
    Written,
)

__version__ = "0.1.0"

__all__ = [
    "App",
    "Blocked",
    "CheckpointCodec",
    "Checkpointer",
    "ChildWorkflowFailedError",
    "ClaimCheckPolicy",
    "ClaimCheckStore",
    "ClaimCheckedCheckpointer",
    "ClaimCheckedDurable",
    "ClaimCheckedQueue",
    "Clock",
    "Completed",
    "Context",
    "Delivery",
    "Durable",
    "Entry",
    "Finish",
    "IncompatibleRecordError",
    "JsonCodec",
    "ManualClock",
    "NonRetryable",
    "NondeterminismError",
    "Pass",
    "QueuePolicy",
    "QueueStats",
    "Recorded",
    "Retry",
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
    "Step",
    "StepContext",
    "StepFailedError",
    "StepResultError",
    "StepTimeoutError",
    "Stores",
    "SystemClock",
    "ToolCall",
    "Topic",
    "Usage",
    "WorkItem",
    "WorkPriority",
    "WorkQueue",
    "WorkState",
    "Worker",
    "Workflow",
    "WorkflowCancelledError",
    "WorkflowConflictError",
    "WorkflowFailedError",
    "WorkflowFinishedError",
    "WorkflowHandle",
    "WorkflowInfo",
    "WorkflowNotFoundError",
    "WorkflowStatus",
    "Written",
    "advance",
    "context",
    "open_stores",
    "resume",
    "start_workflow",
]
