"""The application layer: `App`, typed workflows and steps, handles, topics and retries.

Built on the engine's protocols, with no backing-specific code.
"""

from durably.app._app import App
from durably.app._context import Context, StepContext, context
from durably.app._handles import WorkflowHandle
from durably.app._options import WorkflowOptions
from durably.app._retry import Retry
from durably.app._steps import Step
from durably.app._topics import Topic
from durably.app._workflow import Workflow

__all__ = [
    "App",
    "Context",
    "Retry",
    "Step",
    "StepContext",
    "Topic",
    "Workflow",
    "WorkflowHandle",
    "WorkflowOptions",
    "context",
]
