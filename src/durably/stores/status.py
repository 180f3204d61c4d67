"""A workflow's status as the worker last reported it: queryable and listable by status."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from durably.errors import InvalidInputError, UnreadableRecordError
from durably.redaction import mend_text
from durably.stores.codec import key_text, why_unreadable
from durably.validation import non_negative_int


class WorkflowStatus(StrEnum):
    """Where a workflow is, as of its last pass."""

    QUEUED = "queued"
    """Started, not yet admitted by its kind's concurrency limit: held by the store, never
    handed to a worker, until an admitted workflow of its gate finishes."""
    PENDING = "pending"
    """Started, no pass run yet: reported by `durably.App` handles before the first pass,
    and held by a store for a workflow made to start over (a resume, `Checkpointer.restart`)."""
    RUNNING = "running"
    SLEEPING = "sleeping"
    BLOCKED = "blocked"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PARKED = "parked"
    """Stopped without using attempts (nondeterminism, an incompatible record, exhausted
    crash recovery): no further passes until resumed."""

    @property
    def finished(self) -> bool:
        """Completed, failed and cancelled workflows run no more passes on their own (and
        the retention sweep removes them); a parked one waits to be resumed."""
        return self in (WorkflowStatus.COMPLETED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class WorkflowInfo:
    """A workflow's status, failed attempts so far, last error and when it was set
    (timezone-aware, the store's clock).

    Stores report the first five fields; `durably.App` handles add what the workflow's
    start recorded: its ``kind``, ``tenant``, ``created`` time and ``parent`` id, the id
    of the workflow it was forked from (``forked_from``) and the ids of the first forks
    made of it (``forks``)."""

    workflow: str
    status: WorkflowStatus
    attempts: int
    last_error: str | None
    updated_at: datetime
    kind: str | None = None
    tenant: str | None = None
    created: datetime | None = None
    parent: str | None = None
    forked_from: str | None = None
    forks: tuple[str, ...] = ()


def checked_report(
    status: object, attempts: object, error: str | None
) -> tuple[WorkflowStatus, str | None]:
    """The status and error of a `set_status` call as every backing stores them, checked
    before any I/O: ``attempts`` must be a non-negative int (`InvalidInputError`), and a
    NUL or lone surrogate in ``error`` becomes U+FFFD (`mend_text`): a failure report is
    kept, never refused."""
    non_negative_int(attempts, "attempts")
    checked: WorkflowStatus | None = None
    if isinstance(status, str):  # members are str too (StrEnum)
        try:
            checked = WorkflowStatus(status)
        except ValueError:
            pass
    if checked is None:
        raise InvalidInputError(f"not a workflow status: {status!r}")
    return checked, None if error is None else mend_text(error, "error")


STATUS_RECORD = "status"
"""How an `UnreadableRecordError` names a workflow's status row."""


def read_status(workflow: str | bytes, read: Callable[[], WorkflowInfo]) -> WorkflowInfo:
    """``read()``: ``workflow``'s status row as a store turns it into a `WorkflowInfo`.
    Raises `UnreadableRecordError` (naming the record `STATUS_RECORD`) when a field of it
    cannot be read: a row something else wrote (no such status, a count that is not a
    number, text that is not UTF-8). Every store reads its status rows through this."""
    try:
        return read()
    except Exception as exc:
        raise UnreadableRecordError(
            key_text(workflow), {STATUS_RECORD: why_unreadable(exc)}
        ) from None


def text_field(value: object) -> str:
    """A text field of a stored row: a str, or bytes that are UTF-8 (`UnicodeDecodeError`
    otherwise, a `ValueError`)."""
    if isinstance(value, bytes):
        return value.decode()
    if not isinstance(value, str):
        raise ValueError(f"a text field holds {type(value).__name__}")
    return value


def int_field(value: object) -> int:
    """A count of a stored row: an int, or its decimal text (`ValueError` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | str | bytes):
        raise ValueError(f"a count holds {type(value).__name__}")
    return value if isinstance(value, int) else int(value)


__all__ = [
    "STATUS_RECORD",
    "WorkflowInfo",
    "WorkflowStatus",
    "checked_report",
    "int_field",
    "read_status",
    "text_field",
]
