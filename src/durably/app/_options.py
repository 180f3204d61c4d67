"""`WorkflowOptions`: a workflow's start options, given apart from its arguments.

So a type checker checks the arguments against the body's parameters: a call's keyword
options share no signature with them (a ``ParamSpec`` takes no keyword-only parameter
beside it), so ``wf.options(id=...)`` gives the options in a call of their own, and
``.start(*args)`` takes exactly the body's arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Generic, ParamSpec, TypeVar

from durably.app._values import Duration
from durably.errors import InvalidInputError
from durably.stores.work import WorkPriority

if TYPE_CHECKING:
    from durably.app._handles import WorkflowHandle
    from durably.app._workflow import Workflow

P = ParamSpec("P")
R = TypeVar("R")

OPTIONS = ("id", "tenant", "timeout", "delay", "at", "priority")
"""Keyword options of `Workflow.start`; a body parameter may not take these names."""


@dataclass(frozen=True, slots=True)
class WorkflowOptions(Generic[P, R]):
    """A workflow with its start options: ``wf.options(id=..., tenant=..., timeout=...)``.

    Its `start` and `run` take exactly the body's arguments (checked by a type checker);
    `durably.Context.child` and `durably.Context.start_child` take it in place of the
    workflow.

    Attributes:
        workflow: The workflow it starts.
        id: The workflow's id (default: a fresh one, or one derived for a child).
        tenant: The tenant it runs for (default: the App's, or the running workflow's).
        timeout: How long after its start the workflow is cancelled, instead of the one
            it was registered with.
        delay: How long from the start before its body may begin (never for a child).
        at: When its body may begin instead of ``delay`` (never for a child).
        priority: The `durably.WorkPriority` it is served at within its tenant's turn,
            instead of the one it was registered with.
    """

    workflow: Workflow[P, R]
    id: str | None = None
    tenant: str | None = None
    timeout: Duration | None = None
    delay: Duration | None = None
    at: datetime | None = None
    priority: WorkPriority | None = None

    async def start(self, *args: P.args, **kwargs: P.kwargs) -> WorkflowHandle[R]:
        """Start the workflow with these options and return its handle (`Workflow.start`).

        Args:
            *args: The body's arguments (after the Context).
            **kwargs: The body's keyword arguments.

        Returns:
            The workflow's typed handle.

        Raises:
            InvalidInputError: Arguments that do not fit the body, or a bad option (before
                any I/O), as for `Workflow.start`.
            WorkflowConflictError: The id exists in the tenant under another kind.
        """
        return await self.workflow.start(
            *args,
            id=self.id,
            tenant=self.tenant,
            timeout=self.timeout,
            delay=self.delay,
            at=self.at,
            priority=self.priority,
            **kwargs,
        )

    async def run(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Start the workflow with these options and wait for its result (`Workflow.run`).

        Args:
            *args: The body's arguments (after the Context).
            **kwargs: The body's keyword arguments.

        Returns:
            The body's return value, decoded to its annotated type.

        Raises:
            ConfigurationError: Called inside a workflow body (use `Context.child`).
            InvalidInputError: As for `start`.
            WorkflowFailedError: The workflow failed; carries the recorded error.
            WorkflowCancelledError: The workflow was cancelled or timed out.
        """
        return await self.workflow.run(
            *args,
            id=self.id,
            tenant=self.tenant,
            timeout=self.timeout,
            delay=self.delay,
            at=self.at,
            priority=self.priority,
            **kwargs,
        )


def child_options(
    fn: object, id: str | None
) -> tuple[object, str | None, Duration | None, WorkPriority | None]:
    """The workflow, id, timeout and priority of a child started with ``fn`` and ``id``.

    ``fn`` is a workflow or its `WorkflowOptions`. `InvalidInputError` for a ``tenant``
    option (a child runs in its parent's tenant) or an id given both ways.
    """
    if not isinstance(fn, WorkflowOptions):
        return fn, id, None, None
    if fn.tenant is not None:
        raise InvalidInputError(
            "a child workflow runs in its parent's tenant: give its options no tenant= "
            "(start a workflow of another tenant with wf.options(tenant=...).start(...))"
        )
    if fn.delay is not None or fn.at is not None:
        raise InvalidInputError(
            "a child workflow begins at once: give its options no delay= or at= (sleep in "
            "the parent first, or start a workflow that is not a child)"
        )
    if id is not None and fn.id is not None:
        raise InvalidInputError("child workflow: id= is given twice (in its options and the call)")
    return fn.workflow, id if id is not None else fn.id, fn.timeout, fn.priority


__all__ = ["OPTIONS", "WorkflowOptions", "child_options"]
