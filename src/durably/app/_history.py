"""A workflow's history as operators read it, as JSON-ready data.

What `WorkflowHandle.history` returns and ``durably workflows show --json`` prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel

from durably.app import _layout as layout
from durably.app._unreadable import history_of, kind_of, problems, status_of
from durably.stores.workflows import INBOX_PREFIX, Checkpointer

# What each record of the App's own is, by key prefix (first match wins).
_KINDS = (
    (layout.START, "start"),
    (layout.RESULT, "result"),
    (layout.CANCELLED, "cancelled"),
    (layout.CANCEL, "cancel"),
    (layout.FAILED, "failure"),
    (layout.RESUMES, "resume"),
    (layout.FORK, "fork"),
    (layout.CHILD, "child"),
    (layout.STARTED, "started"),
    (layout.EVENT, "event"),
    (layout.RECV, "recv"),
    (INBOX_PREFIX, "message"),
)


def what(key: str) -> str:
    """What the record under ``key`` is.

    ``step`` (a step's result or failure), ``retry`` (a step's backoff deadline),
    ``child``/``child end``, ``message``, ``recv``, ``event``, ``start``, ``result``,
    ``failure``, ``cancel``, ``cancelled``, ``resume``, ``fork``, ``started`` or
    ``recorded`` (a sleep, ``ctx.now()`` and the like).
    """
    if layout.RETRY in key:
        return "retry"
    for prefix, name in _KINDS:
        if key.startswith(prefix):
            return "child end" if name == "child" and key.endswith(":end") else name
    return "recorded" if key.startswith(layout.PREFIX) else "step"


def jsonable(value: object) -> Any:
    """``value`` as JSON-ready data (models, dataclasses, enums, datetimes in ISO 8601)."""
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(mode="json"))
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return value


async def described(
    checkpointer: Checkpointer[Any], key: str, tenant: str, id: str
) -> dict[str, Any] | None:
    """The history of the workflow keyed ``key`` (``id`` of ``tenant``), JSON-ready.

    Its kind and status, what cannot be read of it, and every record with its time and
    what it is, in recorded order (the start record first). None when nothing is stored.
    """
    info, unread_status = await status_of(checkpointer, key)
    history, unreadable = await history_of(checkpointer, key)
    if info is None and unread_status is None and not history and not unreadable:
        return None
    values = {k: written.value for k, written in history.items()}
    kind, start = kind_of(key, values, unreadable)
    shown = None if info is None else dataclasses.replace(info, workflow=id, tenant=tenant)
    shape: dict[str, Any] = jsonable(
        {
            "tenant": tenant,
            "workflow": id,
            "key": key,
            "kind": kind,
            "status": shown,
            "unreadable": problems(unread_status, unreadable, start),
            "history": [
                *(
                    {"key": k, "what": what(k), "value": w.value, "at": w.at}
                    for k, w in history.items()
                ),
                *({"key": k, "what": what(k), "unreadable": why} for k, why in unreadable.items()),
            ],
        }
    )
    return shape


__all__ = ["described", "jsonable", "what"]
