"""durably: agent runs, work queues and workflows that survive crashes, deploys and restarts.

This namespace is what an App user writes: the App and its decorators, handles and topics,
the errors to catch, clocks, and the models of agent runs and work items. One import deeper:
`durably.stores` (the contracts every backing implements), `durably.engine` (the engine
beneath the App), `durably.claimcheck` (large values) and `durably.testing` (the
conformance suites). The backings live in `durably.memory`, `durably.sqlite`,
`durably.postgres` and `durably.redis`; importing durably imports no datastore driver.
"""

from durably.app import (
    App,
    Context,
    Limits,
    Retry,
    Step,
    StepContext,
    Topic,
    Workflow,
    WorkflowHandle,
    context,
)
from durably.clock import Clock, ManualClock, SystemClock
from durably.errors import (
    ChildWorkflowFailedError,
    ConfigurationError,
    DurablyError,
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
    WorkflowLimitError,
    WorkflowNotFoundError,
)
from durably.stores import (
    QueueStats,
    RunRecord,
    RunState,
    SessionRecord,
    StateKey,
    Stores,
    ToolCall,
    Usage,
    WorkflowInfo,
    WorkflowStatus,
    WorkItem,
    WorkPriority,
    WorkState,
    open_stores,
)

__version__ = "0.1.0"

__all__ = [
    "App",
    "ChildWorkflowFailedError",
    "Clock",
    "ConfigurationError",
    "Context",
    "DurablyError",
    "IncompatibleRecordError",
    "Limits",
    "ManualClock",
    "NonRetryable",
    "NondeterminismError",
    "QueueStats",
    "Retry",
    "RunRecord",
    "RunState",
    "SessionRecord",
    "StateKey",
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
    "WorkState",
    "Workflow",
    "WorkflowCancelledError",
    "WorkflowConflictError",
    "WorkflowFailedError",
    "WorkflowFinishedError",
    "WorkflowHandle",
    "WorkflowInfo",
    "WorkflowLimitError",
    "WorkflowNotFoundError",
    "WorkflowStatus",
    "context",
    "open_stores",
]
