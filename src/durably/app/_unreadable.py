"""Reading workflows around records nobody can read (corrupt, or written by something else).

The ``workflows`` commands and `WorkflowHandle.history` list, show and delete such a
workflow, saying what is unreadable and why, instead of stopping at the first record that
fails.
"""

from __future__ import annotations

from typing import Any

from durably.app._layout import START, read_start
from durably.errors import IncompatibleRecordError, UnreadableRecordError
from durably.stores.status import STATUS_RECORD, WorkflowInfo
from durably.stores.workflows import Checkpointer, Written


async def status_of(
    checkpointer: Checkpointer[Any], workflow: str
) -> tuple[WorkflowInfo | None, str | None]:
    """``workflow``'s status (None: never reported), or why it cannot be read."""
    try:
        return await checkpointer.get_status(workflow), None
    except UnreadableRecordError as exc:
        return None, exc.unreadable.get(STATUS_RECORD, str(exc))


async def records_of(
    checkpointer: Checkpointer[Any], workflow: str
) -> tuple[dict[str, object], dict[str, str]]:
    """``workflow``'s records that can be read, and why each other cannot."""
    try:
        return await checkpointer.load(workflow), {}
    except UnreadableRecordError as exc:
        return exc.readable, exc.unreadable


async def history_of(
    checkpointer: Checkpointer[Any], workflow: str
) -> tuple[dict[str, Written], dict[str, str]]:
    """``workflow``'s history of records that can be read, and why each other cannot."""
    try:
        return await checkpointer.history(workflow), {}
    except UnreadableRecordError as exc:
        readable = {key: w for key, w in exc.readable.items() if isinstance(w, Written)}
        return readable, exc.unreadable


def kind_of(
    workflow: str, stored: dict[str, object], unreadable: dict[str, str]
) -> tuple[str | None, str | None]:
    """The kind ``workflow``'s start record names, and what is wrong with it.

    What is wrong: nothing (None), it cannot be read, or it is not of the shape an App
    writes.
    """
    if START in unreadable:
        return None, f"its start record cannot be read: {unreadable[START]}"
    try:
        start = read_start(stored, workflow)
    except IncompatibleRecordError as exc:
        return None, f"its start record is not one durably.App writes: {exc}"
    return (None if start is None else start["kind"]), None


def problems(status: str | None, unreadable: dict[str, str], start: str | None) -> str | None:
    """One line saying what cannot be read of a workflow, or None when everything can."""
    said = [f"status: {status}"] if status else []
    if start is not None:
        said.append(start)
    said += [f"record {key!r}: {why}" for key, why in unreadable.items() if key != START]
    return "; ".join(said) or None


__all__ = ["history_of", "kind_of", "problems", "records_of", "status_of"]
