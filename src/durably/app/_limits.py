"""`Limits`: what a workflow body may start, what one run may hold, what a tenant may hold.

A body that starts workflows without end (each run starting two more, say) is stopped
with `WorkflowLimitError`; a run whose history would grow without end parks with
`RecordLimitError` (its body calls ``ctx.continue_as_new`` before that); a start past a
tenant's cap is refused by the store, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from durably.errors import InvalidInputError, WorkflowLimitError
from durably.stores.admission import TenantCaps

MOST = 1_000_000_000
"""The largest value any limit takes (a bound, not a wish: 0 is not "unlimited")."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one workflow body may start, one run may record and one tenant may hold.

    The same for every tenant.

    ``children`` and ``depth`` count the workflows a body starts, children (``ctx.child``,
    ``ctx.start_child``) and plain starts (``wf.start`` inside the body) alike. A start
    the body recorded before is never refused (a replay, or a deploy that lowered a
    limit), only a new one.

    Args:
        children: The most workflows one body starts over its life (each resume included).
        depth: The most bodies in a chain of bodies starting bodies: a workflow started
            from outside a body has depth 0, one its body starts depth 1, and so on; a
            start that would make depth ``depth + 1`` is refused.
        records: The most records one run of a workflow may hold (the messages waiting
            in its inbox not counted): a run about to record past it parks with
            `RecordLimitError`. A workflow that would grow without end calls
            ``ctx.continue_as_new(...)`` to go on with an empty history.
        running_per_tenant: The most workflows one tenant may have unfinished (started
            and not completed, failed or cancelled; sleeping, waiting and parked ones
            included), counted by the store across every process; None: no cap. A start
            past it raises `WorkflowLimitError` before anything is stored.
        started_per_tenant: The most workflows one tenant may hold in the store (started
            and not yet removed by the retention sweep or a delete); None: no cap. A start
            past it raises `WorkflowLimitError` before anything is stored.

    Raises:
        InvalidInputError: A limit that is not an int from 1 to 1,000,000,000 (a bool is
            not an int), or a per-tenant cap that is neither that nor None.
    """

    children: int = 10_000
    depth: int = 100
    records: int = 100_000
    running_per_tenant: int | None = None
    started_per_tenant: int | None = None

    def __post_init__(self) -> None:
        for name in ("children", "depth", "records", "running_per_tenant", "started_per_tenant"):
            value = getattr(self, name)
            if value is None and name.endswith("_per_tenant"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MOST:
                raise InvalidInputError(
                    f"Limits.{name} must be an int from 1 to {MOST:,}"
                    f"{' or None' if name.endswith('_per_tenant') else ''}, got {value!r}"
                )

    @property
    def tenant_caps(self) -> TenantCaps:
        """The per-tenant caps, as the store applies them."""
        return TenantCaps(running=self.running_per_tenant, started=self.started_per_tenant)


def check_start(limits: Limits, *, tenant: str, workflow: str, started: int, depth: int) -> None:
    """Refuse a start past one of ``limits``.

    The start is the ``started``-th of ``workflow``'s body and would make a workflow of
    depth ``depth``.

    Raises:
        WorkflowLimitError: Naming the tenant, the limit passed and the count.
    """
    if started > limits.children:
        raise WorkflowLimitError(tenant, workflow, "children", limits.children, started)
    if depth > limits.depth:
        raise WorkflowLimitError(tenant, workflow, "depth", limits.depth, depth)


__all__ = ["MOST", "Limits", "check_start"]
