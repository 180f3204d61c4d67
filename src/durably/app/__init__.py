"""The application layer: `App`, typed workflows and steps, handles and topics, built on the
engine's protocols (no backing-specific code here)."""

from durably.app.app import App
from durably.app.context import Context, StepContext, context
from durably.app.handles import WorkflowHandle
from durably.app.retry import Retry
from durably.app.steps import Step
from durably.app.topics import Topic
from durably.app.workflow import Workflow

__all__ = [
    "App",
    "Context",
    "Retry",
    "Step",
    "StepContext",
    "Topic",
    "Workflow",
    "WorkflowHandle",
    "context",
]
