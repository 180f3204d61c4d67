"""Forking a workflow: a new one with the same arguments and the records before a step.

The records are copied from the original, so the fork replays them and re-runs the rest on
the code deployed now (as DBOS's ``fork_workflow``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from durably.app import _layout as layout
from durably.app import _tenancy as tenancy
from durably.app._catalogue import catalogue
from durably.app._core import Core
from durably.errors import InvalidInputError, WorkflowConflictError
from durably.stores.gates import WorkflowGate, admit_through
from durably.stores.workflows import Written

MAX_NOTED = 8
"""How many forks of a workflow its status names (its history lists every one)."""


def copied(history: Mapping[str, Written], from_step: str | None, id: str) -> dict[str, object]:
    """The records of ``history`` a fork from ``from_step`` starts with.

    Every record the body made before ``from_step`` in recorded order (none for None).
    `InvalidInputError` naming ``from_step`` for a key the body never recorded, and for a
    child started before it whose end was not recorded before it (the child would wake
    the original).
    """
    body = [key for key in history if not layout.bookkeeping(key)]
    if from_step is None:
        return {}
    if from_step not in body:
        raise InvalidInputError(
            f"from_step {from_step!r}: workflow {id!r} recorded no such step (its steps: "
            f"{', '.join(repr(k) for k in body[:10])}{', …' if len(body) > 10 else ''})"
        )
    kept = {key: history[key].value for key in body[: body.index(from_step)]}
    for key, value in kept.items():
        pending_child = (
            key.startswith(layout.CHILD)
            and not key.endswith(":end")
            and layout.end_key(key) not in kept
        )
        if pending_child:
            raise InvalidInputError(
                f"from_step {from_step!r}: the child started at {key!r} had not ended "
                "before it; fork from that child's step or from one after its end"
            )
        taken = key.startswith(layout.RECV) and isinstance(value, dict) and "m" in value
        if taken and "v" not in value:  # type: ignore[operator]
            raise InvalidInputError(
                f"from_step {from_step!r}: the message {key!r} took is kept only in "
                "the original's inbox; fork from that step or an earlier one"
            )
    return kept


def fork_start(
    core: Core, start: Mapping[str, Any], id: str, from_step: str | None, priority: int
) -> dict[str, Any]:
    """The start record of a fork of the workflow whose start record is ``start``.

    Its kind, arguments, tenant and gate, the original's ``priority`` (the one it is
    served at now), created now, with no parent (a fork is started from outside), naming
    the workflow it was forked from.
    """
    now = core.clock.now()
    timeout_at = start.get("timeout_at")
    gate = start.get("gate")
    record = layout.start_record(
        kind=str(start["kind"]),
        args=dict(start["args"]),
        tenant=str(start["tenant"]),
        created=now,
        timeout_at=None if timeout_at is None else now + (timeout_at - start["created"]),
        gate=gate if isinstance(gate, str) else None,
        priority=priority,
    )
    record["forked_from"] = {"id": id, "from_step": from_step}
    return record


async def fork(
    core: Core, key: str, id: str, tenant: str, from_step: str | None, new_id: str | None
) -> tuple[str, str, str]:
    """Fork the workflow keyed ``key`` (``id`` of ``tenant``); its new id, key and kind."""
    if from_step is not None and not isinstance(from_step, str):
        raise InvalidInputError(f"from_step must be a step key, got {type(from_step).__name__}")
    fresh = tenancy.new_id(new_id) if new_id is not None else str(uuid.uuid4())
    fresh_key = tenancy.workflow_key(tenant, fresh)
    checkpointer = (await core.stores()).checkpointer
    history = await checkpointer.history(key)
    values = {k: w.value for k, w in history.items()}
    start = layout.read_start(values, id)
    if start is None:
        raise InvalidInputError(f"workflow {id!r} was not started by an App: it cannot be forked")
    records = copied(history, from_step, id)
    kind = str(start["kind"])
    taken = f"is taken in tenant {tenant!r}: a fork starts a new workflow"
    if await checkpointer.load(fresh_key):
        raise WorkflowConflictError(fresh, kind, kind, reason=taken)
    for record, value in records.items():
        await checkpointer.supply(fresh_key, record, value)
    begun = fork_start(core, start, id, from_step, layout.priority_of(values))
    core.durable(kind)  # its scheduler open: the admission may make workflows ready
    # Through the original's gate, as a start is (QUEUED while it is full); counted under
    # its tenant, never refused by the tenant's caps (an operator's action, as a resume).
    admission = await admit_through(
        checkpointer, fresh_key, layout.START, begun, tenant=tenant, gate=_gate(core, begun)
    )
    if admission.recorded.value != begun:
        raise WorkflowConflictError(fresh, kind, kind, reason=taken)
    await catalogue(checkpointer, fresh_key, begun)
    note = {"id": fresh, "from_step": from_step}
    number = 1 + sum(1 for k in history if k.startswith(layout.FORK))
    while not (await checkpointer.supply(key, f"{layout.FORK}{number}", note)).first:
        number += 1  # a concurrent fork took this number
    if not admission.queued:  # a queued one is made ready by the write admitting it
        await core.durable(kind).scheduler.make_ready(
            fresh_key, tenant=tenant, priority=layout.start_priority(begun)
        )
    return fresh, fresh_key, kind


def _gate(core: Core, start: Mapping[str, Any]) -> WorkflowGate | None:
    """The gate a fork with start record ``start`` goes through (None: none).

    As this App registers its kind (none if the kind has no ``concurrency=`` now), else
    with the limit the gate keeps (a fork from the command line).
    """
    name, kind = start.get("gate"), str(start["kind"])
    if not isinstance(name, str):
        return None
    registered = core.workflows.get(kind)
    priority = layout.start_priority(start)
    if registered is None:
        return WorkflowGate(name, None, kind, priority)
    return registered.gates.gate(name, priority)


__all__ = ["MAX_NOTED", "copied", "fork", "fork_start"]
