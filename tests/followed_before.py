"""Run records of App workflows as a release before their state followed the workflow left
them: the workflow completed or waiting, its run stored as pending."""

from __future__ import annotations

from typing import Any

from durably.stores.catalog import CatalogEntry, Cataloguing
from durably.stores.runs import FOLLOWS, RunRecord, RunState, StateKey, StateStore
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Checkpointer

TENANT = "acme"
ENDS = {"done": WorkflowStatus.COMPLETED, "waiting": WorkflowStatus.BLOCKED}
FOLLOWED = {"done": RunState.COMPLETED, "waiting": RunState.SUSPENDED}


async def ended_workflows(checkpointer: Checkpointer[Any], state: StateStore) -> None:
    """Catalogue, open and move the workflows of `ENDS` (each run keyed by its name)."""
    assert isinstance(checkpointer, Cataloguing)
    for name, status in ENDS.items():
        key = f"key-{name}"
        await checkpointer.catalog(key, CatalogEntry(tenant=TENANT, kind="k", created_us=1))
        run = RunRecord(run_id=name, tenant=TENANT, agent_name="k", metadata={FOLLOWS: key})
        await state.put_run(run)
        holder = await checkpointer.claim(key, 30.0, 30.0)
        assert holder is not None
        await checkpointer.set_status(holder, status)


async def states(state: StateStore) -> tuple[dict[str, RunState], dict[RunState, int]]:
    """Each run's stored state, and the tenant's totals by state."""
    stored = {}
    for name in ENDS:
        run = await state.get_run(StateKey(tenant=TENANT, id=name))
        assert run is not None
        stored[name] = run.state
    (totals,) = await state.tenant_totals([TENANT])
    return stored, {s: n for s, n in totals.by_state.items() if n}


BEFORE = ({"done": RunState.PENDING, "waiting": RunState.PENDING}, {RunState.PENDING: 2})
AFTER = (FOLLOWED, {RunState.COMPLETED: 1, RunState.SUSPENDED: 1})
