"""durably.engine: the engine beneath the App.

`Execution` and `resume`/`advance` turn an ``async def`` into a durable workflow over a
`durably.stores.Durable`; a `Worker` serves work queues and workflow kinds, each through a
service (`QueueService`, `WorkflowService`) that shares a `ServiceContext` with it. The App
drives workflows through exactly this seam. The engine never imports the App.
"""

from durably.engine.queue_service import Handler, QueueService
from durably.engine.runtime import Execution, advance, resume
from durably.engine.schedules import Schedule, tick_of
from durably.engine.service import ServiceContext
from durably.engine.worker import Worker, start_workflow
from durably.engine.workflow_service import Body, WorkflowService

__all__ = [
    "Body",
    "Execution",
    "Handler",
    "QueueService",
    "Schedule",
    "ServiceContext",
    "Worker",
    "WorkflowService",
    "advance",
    "resume",
    "start_workflow",
    "tick_of",
]
