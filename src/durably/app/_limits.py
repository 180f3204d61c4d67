"""`Limits`: how much a workflow body may start.

A body that starts workflows without end (each run starting two more, say) is stopped
with `WorkflowLimitError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from durably.errors import InvalidInputError, WorkflowLimitError

MOST = 1_000_000_000
"""The largest value either limit takes (a bound, not a wish: 0 is not "unlimited")."""


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one workflow body may start; the same for every tenant.

    Both count the workflows a body starts, children (``ctx.child``, ``ctx.start_child``)
    and plain starts (``wf.start`` inside the body) alike. A start the body recorded
    before is never refused (a replay, or a deploy that lowered a limit), only a new one.

    Args:
        children: The most workflows one body starts over its life (each resume included).
        depth: The most bodies in a chain of bodies starting bodies: a workflow started
            from outside a body has depth 0, one its body starts depth 1, and so on; a
            start that would make depth ``depth + 1`` is refused.

    Raises:
        InvalidInputError: A limit that is not an int from 1 to 1,000,000,000 (a bool is
            not an int).
    """

    children: int = 10_000
    depth: int = 100

    def __post_init__(self) -> None:
        for name in ("children", "depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MOST:
                raise InvalidInputError(
                    f"Limits.{name} must be an int from 1 to {MOST:,}, got {value!r}"
                )


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
