"""Debounce slots: the one pending workflow of a debounce key, kept by the work queue's store.

A slot holds the id of the workflow a debounced start made, the last arguments given and
when it is due. A start with the slot while it is pending replaces the arguments and pushes
the due time back (`WorkQueue.debounce`, one write); the workflow, once due, takes the slot
(`WorkQueue.begin_debounced`, one write) and runs with the arguments it holds. Once that
answer is recorded the slot is deleted (`WorkQueue.release_debounced`), so a key keeps no
row once its workflow began; a start after that makes a new pending workflow. Every
backing applies the same rule in one statement or script, so two processes starting at
once join one workflow.
"""

from __future__ import annotations

from dataclasses import dataclass

from durably.errors import InvalidInputError
from durably.validation import finite, identifier

SLOT_BYTES = 64
"""A slot's length: the hex SHA-256 of its tenant, workflow kind and key."""


@dataclass(frozen=True, slots=True)
class Begun:
    """What `WorkQueue.begin_debounced` answers a workflow that asks to begin.

    ``args`` the arguments to run with (the slot is now taken: a later start makes a new
    workflow); else ``due`` when to ask again (a start pushed it back); neither when the
    slot names another workflow (the caller runs with its own start record's arguments).
    """

    args: str | None = None
    due: float | None = None


def debounce_call(slot: str, workflow: str, args: str, due: float) -> tuple[str, str, str, float]:
    """The arguments of a ``debounce`` call, checked before any I/O: a slot, the id of the
    workflow a new slot would name, the encoded arguments (text) and a finite due time.
    Raises `InvalidInputError` naming the bad one."""
    if not isinstance(args, str):
        raise InvalidInputError(f"args must be encoded text, got {type(args).__name__}")
    return _slot(slot), identifier(workflow, "workflow"), args, finite(due, "due")


def begin_call(slot: str, workflow: str, now: float) -> tuple[str, str, float]:
    """The arguments of a ``begin_debounced`` call, checked before any I/O."""
    return _slot(slot), identifier(workflow, "workflow"), finite(now, "now")


def release_call(slot: str, workflow: str) -> tuple[str, str]:
    """The arguments of a ``release_debounced`` call, checked before any I/O."""
    return _slot(slot), identifier(workflow, "workflow")


def slot_call(slot: str) -> str:
    """The argument of a ``debounced`` read, checked before any I/O."""
    return _slot(slot)


def _slot(slot: str) -> str:
    identifier(slot, "slot")
    if len(slot) != SLOT_BYTES:
        raise InvalidInputError(f"slot must be {SLOT_BYTES} hex characters, got {slot!r}")
    return slot


__all__ = ["SLOT_BYTES", "Begun", "begin_call", "debounce_call", "release_call", "slot_call"]
