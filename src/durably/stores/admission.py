"""Admission: per-tenant counts of workflows, kept by the store with its own writes.

A workflow is *admitted* when its start record lands through `Admitting.admit`: the store
counts it under its tenant as started (held in the store until a delete or the retention
sweep removes it) and as running (unfinished: not completed, failed or cancelled; waiting
and parked included). Every status write that moves an admitted workflow between finished
and unfinished moves the running count with it, in the same write, so a count is never a
scan. `TenantCaps` refuses an admission past either count, before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from durably.errors import ConfigurationError, InvalidInputError, WorkflowLimitError
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Checkpointer, Recorded, step_key
from durably.validation import identifier

MOST_ADMITTED = 1_000_000_000
"""The largest cap a tenant may be given (0 is not "unlimited": None is)."""


@dataclass(frozen=True, slots=True)
class TenantCaps:
    """The most workflows one tenant may hold unfinished (``running``) and in the store
    (``started``); None leaves a count uncapped."""

    running: int | None = None
    started: int | None = None

    def __post_init__(self) -> None:
        for name in ("running", "started"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInputError(f"{name} must be an int or None, got {value!r}")
            if not 1 <= value <= MOST_ADMITTED:
                raise InvalidInputError(f"{name} must be from 1 to {MOST_ADMITTED:,}, got {value}")

    @property
    def capped(self) -> bool:
        """Whether either count is capped."""
        return self.running is not None or self.started is not None


NO_CAPS = TenantCaps()


@dataclass(frozen=True, slots=True)
class TenantCounts:
    """A tenant's admitted workflows: unfinished (``running``) and held (``started``)."""

    running: int = 0
    started: int = 0


def refuse_over(caps: TenantCaps, counts: TenantCounts, *, tenant: str, workflow: str) -> None:
    """Refuse admitting ``workflow`` to ``tenant`` whose counts are ``counts``: one more
    would pass a cap of ``caps``. Every backing applies this one rule.

    Raises:
        WorkflowLimitError: ``limit`` is ``"running_per_tenant"`` or
            ``"started_per_tenant"``, ``count`` what the tenant would hold.
    """
    if caps.running is not None and counts.running >= caps.running:
        raise WorkflowLimitError(
            tenant, workflow, "running_per_tenant", caps.running, counts.running + 1
        )
    if caps.started is not None and counts.started >= caps.started:
        raise WorkflowLimitError(
            tenant, workflow, "started_per_tenant", caps.started, counts.started + 1
        )


def running_after(status: str) -> bool:
    """Whether a workflow whose status is now ``status`` counts as running: it is not
    finished (`WorkflowStatus.finished`)."""
    return not WorkflowStatus(status).finished


@runtime_checkable
class Admitting(Protocol):
    """The `Checkpointer` capability that counts workflows per tenant. Every shipped
    checkpointer has it."""

    async def admit(
        self, workflow: str, key: str, value: object, *, tenant: str, caps: TenantCaps
    ) -> Recorded[object]:
        """`supply` ``key`` (the start record) and, when it is the first write, count the
        workflow under ``tenant`` as started and running, atomically; a workflow whose
        record was there already is returned as `supply` would, counting nothing.

        Raises:
            WorkflowLimitError: A first write that would pass ``caps`` (nothing written).
        """
        ...

    async def tenant_counts(self, tenant: str) -> TenantCounts:
        """``tenant``'s admitted workflows, running and started (zeros for a tenant
        never seen)."""
        ...


MAX_ADMIT_BATCH = 1000
"""The most start records one `AdmittingMany.admit_many` call writes."""


@dataclass(frozen=True, slots=True)
class Admit:
    """One start of an `AdmittingMany.admit_many` call: ``value`` supplied under ``key``
    of ``workflow``, counted under ``tenant`` when it is the first write."""

    workflow: str
    key: str
    value: object
    tenant: str


@runtime_checkable
class AdmittingMany(Protocol):
    """The optional `Checkpointer` capability of many uncapped admissions in one write (a
    bulk start). Every shipped checkpointer has it."""

    async def admit_many(self, admits: Sequence[Admit]) -> list[Recorded[object]]:
        """`Admitting.admit` each start without caps, in one write (one transaction on
        SQLite and PostgreSQL, one round trip per slot on Redis): per start, in order,
        what `supply` would answer. A workflow named twice is admitted once (its first
        start; the later one answers as a repeated start). At most `MAX_ADMIT_BATCH`
        (`InvalidInputError`, before any I/O)."""
        ...


def admit_batch(admits: object) -> list[Admit]:
    """The starts of an `AdmittingMany.admit_many` call, checked before any I/O."""
    if isinstance(admits, (str, bytes)) or not isinstance(admits, Sequence):
        raise InvalidInputError(f"admits must be a sequence of Admit, got {type(admits).__name__}")
    if len(admits) > MAX_ADMIT_BATCH:
        raise InvalidInputError(
            f"admits must be at most {MAX_ADMIT_BATCH} a call, got {len(admits)}"
        )
    for admit in admits:
        if not isinstance(admit, Admit):
            raise InvalidInputError(f"each start must be an Admit, got {admit!r}")
        identifier(admit.workflow, "workflow")
        identifier(admit.tenant, "tenant")
        step_key(admit.key)
    return list(admits)


async def admit_workflow(
    checkpointer: Checkpointer[Any],
    workflow: str,
    key: str,
    value: object,
    *,
    tenant: str,
    caps: TenantCaps = NO_CAPS,
) -> Recorded[object]:
    """`Admitting.admit` where ``checkpointer`` has it; a plain `supply` otherwise, which
    counts nothing (so ``caps`` cannot be kept: `ConfigurationError` if any is set)."""
    admit = getattr(checkpointer, "admit", None)
    if admit is not None:
        recorded: Recorded[object] = await admit(workflow, key, value, tenant=tenant, caps=caps)
        return recorded
    if caps.capped:
        raise ConfigurationError(
            f"{type(checkpointer).__name__} does not count workflows per tenant: "
            "per-tenant limits need a checkpointer with admit()"
        )
    return await checkpointer.supply(workflow, key, value)


__all__ = [
    "MAX_ADMIT_BATCH",
    "MOST_ADMITTED",
    "NO_CAPS",
    "Admit",
    "Admitting",
    "AdmittingMany",
    "TenantCaps",
    "TenantCounts",
    "admit_batch",
    "admit_workflow",
    "refuse_over",
    "running_after",
]
