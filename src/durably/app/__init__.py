"""The application layer: `App`, workflows, steps, tasks, handles, topics, retries, limits.

Built on the engine's protocols, with no backing-specific code.
"""

from durably.app._app import App
from durably.app._context import Context, StepContext, context
from durably.app._handles import WorkflowHandle
from durably.app._limits import Limits
from durably.app._options import WorkflowOptions
from durably.app._retry import Retry
from durably.app._steps import Step
from durably.app._tasks import Task, TaskOptions
from durably.app._topics import Topic
from durably.app._workflow import Workflow

__all__ = [
    "App",
    "Context",
    "Limits",
    "Retry",
    "Step",
    "StepContext",
    "Task",
    "TaskOptions",
    "Topic",
    "Workflow",
    "WorkflowHandle",
    "WorkflowOptions",
    "context",
]
