"""The records the application layer keeps in a workflow's checkpoint, and their keys.

Every key the App writes itself starts with ``durably:``; step names and inline step keys
may not, so a user's record never collides with one of these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durably.errors import ConfigurationError

PREFIX = "durably:"
START = "durably:start"
"""The start record: kind, encoded arguments, tenant, parent, created, timeout."""
RESULT = "durably:result"
"""The encoded return value, written as the body returns."""
CANCEL = "durably:cancel"
"""The cancellation markers `WorkflowHandle.cancel` supplies, one per resume generation."""
RESUMES = "durably:resume"
"""The markers `WorkflowHandle.resume` supplies (``durably:resume#1``, ...)."""
EVENT = "durably:event:"


def occurrence(name: str, count: int) -> str:
    """The key of the ``count``-th call (from 1) of ``name`` in a body."""
    return f"{name}#{count}"


def generation(stored: Mapping[str, object]) -> int:
    """How many times the workflow was resumed (each resume opens a new generation)."""
    return sum(1 for key in stored if key.startswith(f"{RESUMES}#"))


def cancel_key(generation: int) -> str:
    """The cancellation marker of resume generation ``generation``."""
    return occurrence(CANCEL, generation)


def event_key(key: str, count: int) -> str:
    """The record of the ``count``-th `set_event` of ``key``."""
    return occurrence(f"{EVENT}{key}", count)


def latest_event(records: dict[str, object], key: str) -> tuple[bool, object]:
    """Whether ``key`` has an event, and its latest value (the highest occurrence)."""
    prefix = f"{EVENT}{key}#"
    best = 0
    found: object = None
    for name, value in records.items():
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            number = int(name[len(prefix) :])
            if number > best:
                best, found = number, value
    return best > 0, found


def bookkeeping(key: str) -> bool:
    """Whether ``key`` is the App's own bookkeeping (start, result, cancel, resume, inbox
    messages) rather than work a body recorded."""
    return key in (START, RESULT) or key.startswith((CANCEL, RESUMES, "inbox:"))


def user_key(key: str, what: str) -> str:
    """``key`` if a user may name a record with it; `ConfigurationError` otherwise."""
    if key.startswith(PREFIX):
        raise ConfigurationError(f"{what} {key!r}: names starting with {PREFIX!r} are reserved")
    return key


def start_record(
    *,
    kind: str,
    args: dict[str, object],
    tenant: str,
    created: float,
    parent: str | None = None,
    timeout_at: float | None = None,
) -> dict[str, Any]:
    """What `start` supplies under `START` (first writer wins)."""
    return {
        "kind": kind,
        "args": args,
        "tenant": tenant,
        "created": created,
        "parent": parent,
        "timeout_at": timeout_at,
    }


__all__ = [
    "CANCEL",
    "EVENT",
    "PREFIX",
    "RESULT",
    "RESUMES",
    "START",
    "bookkeeping",
    "cancel_key",
    "event_key",
    "generation",
    "latest_event",
    "occurrence",
    "start_record",
    "user_key",
]
