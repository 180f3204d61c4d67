"""Cancelling many workflows in one write: what a bulk cancel asks of a checkpointer.

A cancel of one workflow is a marker (first writer wins) and, for a workflow no pass
runs, its cancelled end written at once. `Cancelling.cancel_many` does that for a page of
workflows in one store call: per workflow it reads the status, writes the marker, and ends
the workflow cancelled when no pass runs it (`ENDED_HERE` statuses, no live claim, its
generation still current), under the same rules as one cancel. What it cannot end (a pass
holds the workflow, or the status says a pass runs it) it leaves to that pass, which sees
the marker. `look_many` is the read the caller makes first: the records a cancel's keys
are derived from, for a page of workflows in one read.

The wakeups are the scheduler's (`durably.stores.workflows.ReadyingMany`): the caller
drops the ended ones' and wakes the rest, per kind, after this write.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from durably.errors import InvalidInputError
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.workflows import named_keys, step_key
from durably.validation import identifier

MAX_CANCEL_BATCH = 1000
"""The most workflows one `Cancelling.cancel_many` or `Cancelling.look_many` names."""

MAX_PREFIXES = 16
"""The most key prefixes one `Cancelling.look_many` names."""

ENDED_HERE = frozenset({WorkflowStatus.PENDING, WorkflowStatus.QUEUED, WorkflowStatus.PARKED})
"""The statuses of a workflow no pass runs: never run (or resumed and not run since),
waiting in its gate's line, or parked. A cancel ends such a workflow itself, unless a pass
holds its claim (a pass beginning on a pending one sees the marker itself)."""


@dataclass(frozen=True, slots=True)
class CancelAsk:
    """One workflow of a `Cancelling.cancel_many` call.

    ``marker`` is written with ``value`` (first writer wins). Ended here, the workflow gets
    ``ended`` recorded with ``reason`` and the status CANCELLED with ``reason`` as its
    error (its attempts kept); not when ``superseded`` is recorded (a later generation
    began since the caller read it).
    """

    workflow: str
    marker: str
    value: object
    ended: str
    superseded: str
    reason: str = "cancelled"


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """What `Cancelling.cancel_many` did to one workflow.

    ``status`` is the one it read before writing (None: none reported, a pending
    workflow); a finished one is left alone (no marker). ``first``: this call wrote the
    marker. ``ended``: this call ended it cancelled. ``held``: a live pass holds its
    claim, so it was not ended here even if its status says no pass runs it.
    """

    workflow: str
    status: WorkflowStatus | None
    first: bool
    ended: bool
    held: bool = False


@dataclass(frozen=True, slots=True)
class Looked:
    """A workflow as `Cancelling.look_many` reads it: its status (None: none reported)
    and the records asked for, decoded."""

    info: WorkflowInfo | None
    records: dict[str, object]


@runtime_checkable
class Cancelling(Protocol):
    """The `Checkpointer` capability a bulk cancel uses. Every shipped checkpointer has it."""

    async def look_many(
        self, workflows: Sequence[str], keys: Collection[str], prefixes: Collection[str] = ()
    ) -> list[Looked]:
        """For each workflow, in order: its status and its records under ``keys`` or under
        a key starting with one of ``prefixes``, read in one round trip (a snapshot per
        workflow). At most `MAX_CANCEL_BATCH` workflows, as many keys as `peek` takes and
        `MAX_PREFIXES` prefixes (`InvalidInputError`, before any I/O)."""
        ...

    async def cancel_many(self, asks: Sequence[CancelAsk]) -> list[CancelOutcome]:
        """Cancel each workflow of ``asks`` as one cancel does (see the module), in one
        write per workflow at least, all sent in one call (one transaction on SQLite and
        PostgreSQL): per ask, in order, what it did. A workflow named twice is cancelled
        once (its first ask). At most `MAX_CANCEL_BATCH` asks (`InvalidInputError`, before
        any I/O)."""
        ...


def endable(status: WorkflowStatus | None) -> bool:
    """Whether a cancel ends a workflow whose status is ``status`` itself (None: none
    reported, a pending workflow), when no live pass holds it."""
    return status is None or status in ENDED_HERE


def cancel_batch(asks: object) -> list[CancelAsk]:
    """The asks of a `Cancelling.cancel_many` call, each workflow once (its first ask),
    refused before any I/O when they are not `CancelAsk`s of usable keys or more than
    `MAX_CANCEL_BATCH`."""
    if isinstance(asks, (str, bytes)) or not isinstance(asks, Sequence):
        raise InvalidInputError(f"asks must be a sequence of CancelAsk, got {type(asks).__name__}")
    if len(asks) > MAX_CANCEL_BATCH:
        raise InvalidInputError(f"asks must be at most {MAX_CANCEL_BATCH} a call, got {len(asks)}")
    kept: dict[str, CancelAsk] = {}
    for ask in asks:
        if not isinstance(ask, CancelAsk):
            raise InvalidInputError(f"each ask must be a CancelAsk, got {ask!r}")
        identifier(ask.workflow, "workflow")
        for name in ("marker", "ended", "superseded"):
            step_key(getattr(ask, name), name)
        if not isinstance(ask.reason, str):
            raise InvalidInputError(f"reason must be a str, got {ask.reason!r}")
        kept.setdefault(ask.workflow, ask)
    return list(kept.values())


def look_batch(
    workflows: object, keys: object, prefixes: object
) -> tuple[list[str], list[str], tuple[str, ...]]:
    """The workflows, keys and prefixes of a `Cancelling.look_many` call, checked before
    any I/O (`InvalidInputError` naming the argument)."""
    if isinstance(workflows, (str, bytes)) or not isinstance(workflows, Sequence):
        raise InvalidInputError(
            f"workflows must be a sequence of ids, got {type(workflows).__name__}"
        )
    if len(workflows) > MAX_CANCEL_BATCH:
        raise InvalidInputError(
            f"workflows must be at most {MAX_CANCEL_BATCH} a call, got {len(workflows)}"
        )
    checked = [identifier(workflow, "workflow") for workflow in workflows]
    wanted = named_keys(keys)
    if isinstance(prefixes, (str, bytes)) or not isinstance(prefixes, Collection):
        raise InvalidInputError(
            f"prefixes must be a collection of key prefixes, got {type(prefixes).__name__}"
        )
    if len(prefixes) > MAX_PREFIXES:
        raise InvalidInputError(f"prefixes: at most {MAX_PREFIXES}, got {len(prefixes)}")
    starts = tuple(dict.fromkeys(identifier(prefix, "prefix") for prefix in prefixes))
    return checked, wanted, starts


def wanted_key(key: str, keys: Collection[str], prefixes: tuple[str, ...]) -> bool:
    """Whether a `look_many` asking for ``keys`` and ``prefixes`` returns record ``key``."""
    return key in keys or key.startswith(prefixes)


__all__ = [
    "ENDED_HERE",
    "MAX_CANCEL_BATCH",
    "MAX_PREFIXES",
    "CancelAsk",
    "CancelOutcome",
    "Cancelling",
    "Looked",
    "cancel_batch",
    "endable",
    "look_batch",
    "wanted_key",
]
