"""Workflow gates: at most N admitted, unfinished workflows per gate, kept by the store.

A workflow kind registered with ``concurrency=N`` starts each workflow through a gate
named by its kind and concurrency key (`gate_name`). The store admits a start while
fewer than N workflows of the gate are admitted and unfinished (waiting, sleeping and
parked included); past that it writes the start with status `WorkflowStatus.QUEUED` into
the gate's line and hands it to no worker. The status write that finishes an admitted
workflow of the gate (completed, failed, cancelled) or deletes it admits the line's next
workflow in the same write: marked admitted, status PENDING, made ready for its kind's
scheduler. A queued workflow cancelled or deleted leaves the line and frees nothing. A
start that brings a higher limit than the gate kept (a deploy raising ``concurrency=``)
first admits from the line up to it, in the same write.

The line rotates tenants: the next admitted is the head of the line of the tenant whose
last admission through the gate is oldest (a tenant never admitted first); a tenant's line
is in priority order (highest first), then the order queued; ties between tenants go to
the higher priority head, then the one queued first. One tenant's burst thus takes turns
with another's later start, and a priority never jumps a tenant's turn.

Throttle: `throttled_until` applies the queue's GCRA (`durably.stores.flow`) to starts:
each start reserves the key's next slot and begins no earlier than it (a delayed start),
so a rate delays starts and never drops one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from durably.errors import ConfigurationError
from durably.stores.admission import NO_CAPS, TenantCaps, admit_workflow
from durably.stores.flow import throttle_tolerance
from durably.stores.workflows import DEFAULT_PRIORITY, Checkpointer, Recorded


def gate_name(kind: str, key: str | None = None) -> str:
    """The gate of workflow kind ``kind`` (with concurrency key ``key``, if any).

    The kind's length leads, so no kind and key name another's gate: kind ``a:b`` keyed
    ``c`` is ``3:a:b:c``, kind ``a`` keyed ``b:c`` is ``1:a:b:c``.
    """
    name = f"{len(kind)}:{kind}"
    return name if key is None else f"{name}:{key}"


@dataclass(frozen=True, slots=True)
class WorkflowGate:
    """Where a start is admitted: the gate's name (`gate_name`), the most workflows it
    admits at once (``limit``; None: the limit the gate keeps, for a start from a process
    that does not register the kind, as a fork from the command line), the scheduler
    namespace (the kind) that serves the workflows it admits, and the start's priority
    (its place in its tenant's line, and what it is made ready at when admitted from the
    line)."""

    name: str
    limit: int | None
    namespace: str
    priority: int = DEFAULT_PRIORITY


@dataclass(frozen=True, slots=True)
class Admission:
    """A start record supplied through a gate: what `supply` answered, and whether the
    workflow waits in the gate's line (`WorkflowStatus.QUEUED`) rather than running."""

    recorded: Recorded[object]
    queued: bool


@dataclass(frozen=True, slots=True)
class GateCounts:
    """A gate's admitted, unfinished workflows and the workflows queued in its line."""

    admitted: int = 0
    queued: int = 0


@dataclass(slots=True)
class GateLine:
    """A gate's line as memory keeps it, and the one rule every backing applies to pick
    the next admitted: the lowest tenant turn (0 = never admitted), then the highest
    priority, then the oldest. Each tenant's line is kept sorted by
    ``(-priority, order queued, workflow, namespace)``."""

    limit: int
    admitted: int = 0
    queued: dict[str, list[tuple[int, int, str, str]]] = field(default_factory=dict)
    turns: dict[str, int] = field(default_factory=dict)
    served: int = 0

    def next_tenant(self) -> str | None:
        """The tenant whose head is admitted next, or None for an empty line."""
        waiting = [
            (self.turns.get(t, 0), line[0][0], line[0][1], t)
            for t, line in self.queued.items()
            if line
        ]
        return min(waiting)[3] if waiting else None

    def serve(self, tenant: str) -> None:
        """``tenant`` had a workflow admitted: to the back of the rotation."""
        self.served += 1
        self.turns[tenant] = self.served


def throttled_until(
    tat: float | None, now: float, interval: float, burst: int
) -> tuple[float, float]:
    """The earliest a start at ``now`` may begin under a key whose reserved instant is
    ``tat`` (None: never used), and the key's new ``tat``. Every backing applies this.

    As the queue's claim-time GCRA, but reserving ahead: a start never waits for a
    claim, it begins at its slot. A key first used starts with its bucket full (no
    burst at first use)."""
    tolerance = throttle_tolerance(interval, burst)
    current = now + tolerance if tat is None else tat
    begins = max(now, current - tolerance)
    return begins, max(current, now) + interval


@runtime_checkable
class Gating(Protocol):
    """The `Checkpointer` capability that admits workflows through gates. Every shipped
    checkpointer has it."""

    async def admit_gated(
        self,
        workflow: str,
        key: str,
        value: object,
        *,
        tenant: str,
        caps: TenantCaps,
        gate: WorkflowGate,
    ) -> Admission:
        """`Admitting.admit` through ``gate``: a first write is admitted while the gate
        has room, else queued (status QUEUED, in the gate's line); a workflow whose record
        was there already is answered as it stands, changing nothing."""
        ...

    async def gate_counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows (zeros for one never used)."""
        ...

    async def rerank_queued(self, workflow: str, gate: str, priority: int) -> bool:
        """Give ``workflow``, queued in gate ``gate``'s line, the place of ``priority`` in
        its tenant's line (among that priority's workflows, where its time queued puts
        it), and the priority it is made ready at once admitted. False when it is not
        queued there (admitted, finished, another gate's): nothing changes."""
        ...

    async def throttle_start(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve a start under throttle ``key`` at ``now`` (the caller's clock):
        the earliest it may begin (`throttled_until`)."""
        ...

    async def repair_gates(self, *, limit: int = 500) -> int:
        """Finish what a process killed in the middle of a gate's steps left undone, for
        about ``limit`` more gated workflows (a rolling walk over every gate): the number
        repaired. Safe beside other repairs and the writes themselves. A store that frees
        a slot and admits the next in one write has nothing to repair (0)."""
        ...


def gating(checkpointer: Checkpointer[Any], kind: str) -> Gating:
    """``checkpointer`` as a `Gating` one; `ConfigurationError` naming workflow kind
    ``kind`` when it cannot gate starts."""
    if not isinstance(checkpointer, Gating):
        raise ConfigurationError(
            f"workflow {kind!r}: concurrency= and throttle= need a store that gates "
            f"workflow starts; {type(checkpointer).__name__} does not"
        )
    return checkpointer


async def admit_through(
    checkpointer: Checkpointer[Any],
    workflow: str,
    key: str,
    value: object,
    *,
    tenant: str,
    caps: TenantCaps = NO_CAPS,
    gate: WorkflowGate | None = None,
) -> Admission:
    """Admit a start record through ``gate`` (none: `admit_workflow`, never queued)."""
    if gate is None:
        recorded = await admit_workflow(
            checkpointer, workflow, key, value, tenant=tenant, caps=caps
        )
        return Admission(recorded, queued=False)
    return await gating(checkpointer, gate.namespace).admit_gated(
        workflow, key, value, tenant=tenant, caps=caps, gate=gate
    )


__all__ = [
    "Admission",
    "GateCounts",
    "GateLine",
    "Gating",
    "WorkflowGate",
    "admit_through",
    "gate_name",
    "gating",
    "throttled_until",
]
