"""`WorkflowHandle`: a started workflow seen from outside, from any process."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from durably.app import _layout as layout
from durably.app._context import current_workflow
from durably.app._core import Core
from durably.app._topics import Topic
from durably.app._values import ANY, Duration, Value, seconds_of, stored_text
from durably.errors import (
    IncompatibleRecordError,
    InvalidInputError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowFinishedError,
    WorkflowNotFoundError,
)
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.validation import identifier

R = TypeVar("R")

# How often a waiting handle looks again: quickly at first, then at most this often.
_FIRST_LOOK = 0.01
_SLOWEST_LOOK = 0.5


class _Looks:
    """The pauses of a handle waiting on a workflow.

    They double from ``_FIRST_LOOK`` to ``_SLOWEST_LOOK``, until the deadline ``timeout``
    sets (None: no deadline).
    """

    def __init__(self, timeout: Duration | None) -> None:
        self._loop = asyncio.get_running_loop()
        limit = None if timeout is None else seconds_of(timeout, "timeout")
        self.deadline = None if limit is None else self._loop.time() + limit
        self._look = _FIRST_LOOK

    async def pause(self) -> bool:
        """Wait until the next look; False, at once, when the deadline has passed."""
        wait = self._look
        if self.deadline is not None:
            remaining = self.deadline - self._loop.time()
            if remaining <= 0:
                return False
            wait = min(wait, remaining)
        await asyncio.sleep(wait)
        self._look = min(self._look * 2, _SLOWEST_LOOK)
        return True


class WorkflowHandle(Generic[R]):
    """A started workflow seen from outside, from any process.

    Given by `Workflow.start`, or found with `App.get_handle` or `Workflow.get_handle`: its
    id, result, status, messages, events, cancel and resume.
    """

    def __init__(self, core: Core, id: str, kind: str, result: Value, created: bool) -> None:
        self._core = core
        self._id = id
        self._kind = kind
        self._result = result
        self._created = created

    @property
    def id(self) -> str:
        """The workflow's id."""
        return self._id

    @property
    def kind(self) -> str:
        """The workflow's kind."""
        return self._kind

    @property
    def created(self) -> bool:
        """Whether the call that gave this handle created the workflow.

        False when the id existed already, and for a handle found with ``get_handle``.
        """
        return self._created

    async def result(self, timeout: Duration | None = None) -> R:
        """Wait for the workflow to end and return its result.

        Works from any process, at any later time until the workflow is swept. A parked
        workflow has not ended: it is waited for.

        Args:
            timeout: How long to wait, in seconds or a timedelta (default: for ever).

        Returns:
            The body's return value, decoded to its annotated type (plain JSON data for a
            kind the App does not register).

        Raises:
            InvalidInputError: Awaited inside a workflow body, where it would hold the pass
                (use `Context.child`), or a ``timeout`` that is not a positive duration.
            WorkflowFailedError: The workflow failed; ``error`` is the failure it recorded.
            WorkflowCancelledError: The workflow was cancelled, or (``timed_out``) its
                own timeout passed.
            TimeoutError: ``timeout`` passed before the workflow ended.
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
            IncompatibleRecordError: The recorded result no longer fits its annotated type.
        """
        if current_workflow() is not None:
            raise InvalidInputError(
                "awaiting handle.result() inside a workflow body would hold the pass; use ctx.child"
            )
        looks = _Looks(timeout)
        checkpointer = (await self._core.stores()).checkpointer
        while True:
            info = await checkpointer.get_status(self._id)
            if info is not None:
                if info.status is WorkflowStatus.COMPLETED:
                    stored = await checkpointer.load(self._id)
                    if layout.RESULT in stored:
                        result: R = _decoded(
                            self._id, layout.RESULT, self._result, stored[layout.RESULT]
                        )
                        return result
                elif info.status is WorkflowStatus.FAILED:
                    raise WorkflowFailedError(self._id, info.last_error)
                elif info.status is WorkflowStatus.CANCELLED:
                    ended = layout.ending(await checkpointer.load(self._id)) or {}
                    raise WorkflowCancelledError(
                        self._id, timed_out=ended.get("e") == layout.TIMED_OUT
                    )
            elif layout.START not in await checkpointer.load(self._id):
                raise WorkflowNotFoundError(self._id)
            if not await looks.pause():
                raise TimeoutError(f"workflow {self._id!r} has not finished")

    async def status(self) -> WorkflowInfo:
        """Return the workflow's status, with its kind, tenant, created time and parent.

        Before its first pass the status is `WorkflowStatus.PENDING`.

        Raises:
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
        """
        _, info = await self._look()
        return info

    async def _look(self) -> tuple[dict[str, object], WorkflowInfo]:
        checkpointer = (await self._core.stores()).checkpointer
        stored = await checkpointer.load(self._id)
        start = stored.get(layout.START)
        if not isinstance(start, dict):
            raise WorkflowNotFoundError(self._id)
        info = await checkpointer.get_status(self._id)
        created = datetime.fromtimestamp(float(start.get("created", 0.0)), UTC)
        if info is None:
            info = WorkflowInfo(self._id, WorkflowStatus.PENDING, 0, None, created)
        parent = start.get("parent")
        return stored, dataclasses.replace(
            info,
            kind=str(start.get("kind")),
            tenant=str(start.get("tenant")),
            created=created,
            parent=None if parent is None else str(parent),
        )

    async def send(self, topic: Topic[Any], value: object) -> None:
        """Send ``value`` on ``topic`` to this workflow and make it ready, atomically.

        The workflow receives it with `Context.recv`. Inside a workflow body the send is
        recorded like a step. A message never revives a finished workflow.

        Args:
            topic: The topic the workflow receives on.
            value: The message, of the topic's type.

        Raises:
            InvalidInputError: ``topic`` is not a `Topic`, or ``value`` is not a valid
                message of it (before any I/O; the message names the topic).
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
            WorkflowFinishedError: The workflow has finished, or a cancel was asked for it
                that its body has not seen yet.
        """
        if not isinstance(topic, Topic):
            raise InvalidInputError(f"send needs a durably.Topic, got {type(topic).__name__}")
        data = topic.encode(value)
        message = {"topic": topic.name, "value": data}

        async def deliver() -> object:
            stored, info = await self._look()
            if info.status.finished:
                raise WorkflowFinishedError(
                    f"workflow {self._id!r} is {info.status.value}: it takes no messages"
                )
            # The cancel marker of the current generation: cancelled, though no pass has
            # ended it yet (a resume opens a new generation, without one).
            if layout.cancel_key(layout.generation(stored)) in stored:
                raise WorkflowFinishedError(
                    f"workflow {self._id!r} is being cancelled: it takes no messages"
                )
            entry = await self._core.durable(self._kind).deliver(
                self._id, message, tenant=layout.tenant_of(stored)
            )
            return entry.key

        ctx = current_workflow()
        if ctx is None:
            await deliver()
        else:  # inside a body: sent once, recorded
            await ctx._outside("send", deliver)

    async def get_event(
        self, key: str, timeout: Duration | None = None, *, type: Any = None
    ) -> Any:
        """Return the latest value the workflow published under event ``key``.

        Args:
            key: The event's key, as given to `Context.set_event`.
            timeout: How long to wait for a first value, in seconds or a timedelta. None:
                do not wait.
            type: The type to decode the value as (default: plain JSON data).

        Returns:
            The latest value; None at once when ``timeout`` is None and there is none yet.

        Raises:
            InvalidInputError: A ``key`` `Context.set_event` would refuse, or a ``timeout``
                that is not a positive duration (before any I/O).
            ConfigurationError: A ``type`` pydantic cannot encode.
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
            TimeoutError: No value was published within ``timeout``.
            IncompatibleRecordError: The published value does not fit ``type``.
        """
        layout.bounded(key, "event key")  # as `Context.set_event` checks it
        value = ANY if type is None else Value.of(type, f"event {key!r}")
        looks = _Looks(timeout)
        checkpointer = (await self._core.stores()).checkpointer
        while True:
            stored = await checkpointer.load(self._id)
            if layout.START not in stored:
                raise WorkflowNotFoundError(self._id)
            found, data = layout.latest_event(stored, key)
            if found:
                return _decoded(self._id, f"event {key!r}", value, data)
            if looks.deadline is None:
                return None
            if not await looks.pause():
                raise TimeoutError(f"workflow {self._id!r} published no event {key!r}")

    async def cancel(self) -> bool:
        """Ask the workflow to stop; its children are cancelled with it.

        The body sees `asyncio.CancelledError` at its next step, sleep, ``recv`` or child
        (a sleeping or waiting workflow is woken for it; a parked one ends cancelled at
        once). Inside a workflow body the cancel is recorded like a step.

        Returns:
            Whether this call changed anything: False for a finished workflow or one
            already cancelled.

        Raises:
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
        """
        ctx = current_workflow()
        if ctx is not None:  # inside a body: cancelled once, recorded
            return bool(await ctx._outside("cancel", self._cancel))
        return await self._cancel()

    async def _cancel(self) -> bool:
        stored, info = await self._look()
        if info.status.finished:
            return False
        generation = layout.generation(stored)
        # A marker of this call's own: of two cancels, only the one whose marker landed
        # changed anything.
        recorded = await self._core.durable(self._kind).arrive(
            self._id,
            layout.cancel_key(generation),
            uuid.uuid4().hex,
            tenant=layout.tenant_of(stored),
        )
        self._core.cancels.asked(self._id)
        if info.status is WorkflowStatus.PARKED:
            # No pass runs a parked workflow: it ends cancelled here.
            await self._core.end_parked(self._id, generation)
        await cancel_children(self._core, stored)
        return recorded.first

    async def resume(self) -> bool:
        """Make a parked, failed or cancelled workflow ready again, on the code deployed now.

        Recorded steps still answer from the record; a cancel from before no longer applies.

        Returns:
            Whether this call resumed it: False for a workflow in any other state, or when
            a concurrent resume came first.

        Raises:
            WorkflowNotFoundError: No workflow has this id (never started, or swept).
        """
        info = await self.status()
        if info.status not in (
            WorkflowStatus.PARKED,
            WorkflowStatus.FAILED,
            WorkflowStatus.CANCELLED,
        ):
            return False
        return await self._core.resume(self._id, self._kind)

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self._kind} {self._id!r}>"


async def find_handle(core: Core, id: str) -> WorkflowHandle[Any]:
    """The handle of existing workflow ``id``, of any kind; `WorkflowNotFoundError`.

    Its result is decoded with the registered kind's return type when the App has it.
    """
    identifier(id, "id")
    stored = await (await core.stores()).checkpointer.load(id)
    start = stored.get(layout.START)
    if not isinstance(start, dict):
        raise WorkflowNotFoundError(id)
    kind = str(start.get("kind"))
    registered = core.workflows.get(kind)
    result = registered.signature.result if registered is not None else ANY
    return WorkflowHandle(core, id, kind, result, False)


async def cancel_children(core: Core, stored: Mapping[str, object]) -> None:
    """Cancel the children a workflow's records name (those still running)."""
    for child in layout.children(stored):
        try:
            handle = await find_handle(core, child)
        except WorkflowNotFoundError:
            continue  # swept
        await handle._cancel()


def _decoded(workflow: str, where: str, value: Value, data: object) -> Any:
    """``data`` (read from ``where``) decoded as ``value``.

    `IncompatibleRecordError` when it no longer fits (a changed model, say), rather than
    pydantic's own error.
    """
    try:
        return value.decode(data)
    except ValueError as exc:
        raise IncompatibleRecordError(
            workflow, where, value.type_name, stored_text(data), str(exc)
        ) from None


__all__ = ["WorkflowHandle", "cancel_children", "find_handle"]
