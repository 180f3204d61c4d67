"""Agent runs: the `RunRecord` every workflow started through the App has.

A workflow's run record is kept under the workflow's tenant and id, with the workflow's kind
as its agent name, and names the workflow's key in its metadata (`FOLLOWS`). The store moves
its state with each status write of the workflow (`durably.stores.runs.run_state`), in the
same transaction, so a reader of the `StateStore` sees it; the App's own readers still take
the state from the status they read beside it (a record stored before the state followed,
on Redis, moves at the workflow's next status write). The record's counters (tokens and
cost) live in the run store and grow server-side through `Context.add_usage`.
"""

from __future__ import annotations

from durably.errors import InvalidInputError, StateConflictError, StateNotFoundError
from durably.stores.runs import (
    COUNTER_LIMIT,
    FOLLOWS,
    RunRecord,
    RunState,
    StateDelta,
    StateKey,
    StateStore,
    Usage,
    run_state,
)
from durably.stores.status import WorkflowStatus

USAGE_ARGUMENTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "requests",
    "cost_micros",
)


def usage_delta(amounts: dict[str, object]) -> StateDelta:
    """The amounts of a `Context.add_usage` call as a `StateDelta`.

    Checked before any I/O: each a non-negative int (a bool is not one) up to
    `COUNTER_LIMIT`; `InvalidInputError` naming the argument otherwise.
    """
    counts: dict[str, int] = {}
    for name in USAGE_ARGUMENTS:
        value = amounts[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputError(f"{name} must be an int, got {type(value).__name__}")
        if value < 0:
            raise InvalidInputError(f"{name} must not be negative, got {value}")
        if value > COUNTER_LIMIT:
            raise InvalidInputError(f"{name} must be at most {COUNTER_LIMIT}, got {value}")
        counts[name] = value
    return StateDelta(
        usage=Usage(
            input_tokens=counts["input_tokens"],
            output_tokens=counts["output_tokens"],
            cached_tokens=counts["cache_read_tokens"],
            cache_write_tokens=counts["cache_write_tokens"],
            requests=counts["requests"],
        ),
        cost_micros=counts["cost_micros"],
    )


def opened_run(tenant: str, id: str, kind: str, workflow: str) -> RunRecord:
    """The run record a workflow's start opens: pending, no usage yet."""
    return RunRecord(run_id=id, tenant=tenant, agent_name=kind, metadata={FOLLOWS: workflow})


async def open_run(state: StateStore, tenant: str, id: str, kind: str, workflow: str) -> None:
    """Store the run record of workflow ``id`` of ``tenant`` if there is none yet.

    ``workflow`` is the engine's key of the workflow. A record of the user's own under
    this id is kept; one that followed an earlier workflow of this key (swept since, as
    this start created the workflow anew) starts over.
    """
    opened = opened_run(tenant, id, kind, workflow)
    try:
        await state.put_run(opened)
    except StateConflictError:
        # The record of an earlier workflow under this id (swept since, as this start is
        # its first) starts over with the new one; a record of the user's own is kept.
        found = await state.get_run(StateKey(tenant=tenant, id=id))
        if found is not None and found.metadata.get(FOLLOWS) == workflow:
            try:
                await state.put_run(opened.model_copy(update={"version": found.version}))
            except StateConflictError:
                pass  # written meanwhile, by the new workflow's own usage


async def add_usage(
    state: StateStore, tenant: str, id: str, kind: str, workflow: str, delta: StateDelta
) -> None:
    """Add ``delta`` to the counters of workflow ``id``'s run, server-side.

    Concurrent additions all land. The record is opened first if its start did not (a
    workflow started before runs were kept), as running: a step of it adds the usage.
    """
    key = StateKey(tenant=tenant, id=id)
    while True:
        try:
            await state.patch_run(key, delta)
            return
        except StateNotFoundError:
            pass
        try:
            await state.put_run(
                opened_run(tenant, id, kind, workflow).model_copy(
                    update={
                        "state": RunState.RUNNING,
                        "usage": delta.usage,
                        "cost_micros": delta.cost_micros,
                    }
                )
            )
            return
        except StateConflictError:
            continue  # opened meanwhile: add to it


async def run_record(
    state: StateStore, tenant: str, id: str, kind: str, workflow: str, status: WorkflowStatus
) -> RunRecord:
    """Workflow ``id``'s run record, with the state its status ``status`` says.

    Its counters are the stored ones (none stored yet: zero).
    """
    stored = await state.get_run(StateKey(tenant=tenant, id=id))
    record = stored if stored is not None else opened_run(tenant, id, kind, workflow)
    return following(record, status)


def following(record: RunRecord, status: WorkflowStatus | None) -> RunRecord:
    """``record`` with the state of a workflow whose status is ``status``."""
    return record.model_copy(update={"state": run_state(status)})


__all__ = [
    "USAGE_ARGUMENTS",
    "add_usage",
    "following",
    "open_run",
    "opened_run",
    "run_record",
    "usage_delta",
]
