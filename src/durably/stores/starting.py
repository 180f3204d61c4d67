"""Starting a workflow in one commit: its start record, catalog entry, run record and wakeup.

An App's start writes four things: the start record (admitted under its tenant), the
workflow's catalog entry, the run record that follows it, and the wakeup that makes it
ready. Written one after another they cost a commit each, and a start is that many round
trips longer before its first pass can begin. A `Durable` whose stores share one database
writes them in one transaction (`StartingWhole`); `whole_starter` finds that capability
under the pacing `Stores.durable` wraps every durable in, and a caller without it writes
them one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from durably.errors import InvalidInputError
from durably.stores.admission import TenantCaps
from durably.stores.catalog import CatalogEntry
from durably.stores.pacing import PacedDurable
from durably.stores.runs import RunRecord, StateStore
from durably.stores.workflows import Durable, Recorded, step_key
from durably.validation import identifier


@dataclass(frozen=True, slots=True)
class WholeStart:
    """A workflow's first start, as `StartingWhole.start_whole` writes it; its workflow,
    tenant and key are checked when it is made (`InvalidInputError`), before any I/O."""

    workflow: str
    """The workflow's key in the store."""
    key: str
    """The start record's key."""
    value: object
    """The start record."""
    tenant: str
    """The tenant it is admitted and served under."""
    priority: int | None
    """Its place in its tenant's turn (`durably.stores.workflows.ready_priority`)."""
    entry: CatalogEntry
    """Its catalog entry."""
    run: RunRecord
    """The run record that follows it (version 0: a new record)."""

    def __post_init__(self) -> None:
        identifier(self.workflow, "workflow")
        identifier(self.tenant, "tenant")
        step_key(self.key)
        for name, tenant in (("catalog entry", self.entry.tenant), ("run", self.run.tenant)):
            if tenant != self.tenant:
                raise InvalidInputError(
                    f"a start of tenant {self.tenant!r} with a {name} of tenant {tenant!r}"
                )


@dataclass(frozen=True, slots=True)
class WholeStarted:
    """What `StartingWhole.start_whole` wrote."""

    recorded: Recorded[object]
    """The start record stored under the key: this start's (``first``) or an earlier one."""
    opened: bool
    """Whether its run record was stored and the workflow made ready with it. False for
    a start already recorded (nothing but the record was read), and for a first start
    whose tenant holds a run record under the run's id already: the caller settles that
    record, then makes the workflow ready."""


class StartingWhole(Protocol):
    """A `Durable` that writes a workflow's first start in one commit."""

    async def start_whole(
        self, start: WholeStart, *, caps: TenantCaps, state: StateStore
    ) -> WholeStarted:
        """Admit ``start``'s record under its tenant (`WorkflowLimitError` past ``caps``,
        nothing written) and, when this call wrote it, in the same commit: enter its
        catalog entry (one there is kept) and, unless the tenant holds a run record under
        the run's id, store its run record in ``state`` and make the workflow ready.

        Raises:
            ConfigurationError: ``state`` is not a store of this durable's database.
            WorkflowLimitError: Past ``caps``; nothing written.
        """
        ...


def whole_starter(durable: Durable[Any]) -> StartingWhole | None:
    """``durable`` (under its pacing) where it writes a first start in one commit; else None."""
    inner = durable.inner if isinstance(durable, PacedDurable) else durable
    # Not isinstance(StartingWhole): a protocol check on every start.
    return inner if callable(getattr(inner, "start_whole", None)) else None  # type: ignore[return-value]


__all__ = ["StartingWhole", "WholeStart", "WholeStarted", "whole_starter"]
