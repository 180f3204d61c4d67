"""The stores' batched writes on every backing: a page's cancel in one call (its marker,
and the end of what no pass runs, under the rules of one cancel), and a batch of starts
(admissions, wakeups, run records), counted from outside the call that made them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from durably.errors import Fenced, InvalidInputError
from durably.stores.admission import NO_CAPS, Admit, Admitting, AdmittingMany
from durably.stores.cancelling import MAX_CANCEL_BATCH, CancelAsk, Cancelling
from durably.stores.catalog import CatalogEntry, Cataloguing
from durably.stores.opening import Stores, open_stores
from durably.stores.runs import FOLLOWS, CreatingRuns, RunRecord, RunState, StateKey
from durably.stores.status import WorkflowStatus
from durably.stores.work import WorkPriority
from durably.stores.workflows import Pass, Ready, ReadyingMany, Scheduler
from tests.pg_service import create_database
from tests.redis_service import durable_server

REDIS_DB = 15  # a database index no other suite uses
LONG = 30.0
CREATED_US = 1_780_000_000_000_000


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "memory":
        dsn = "memory://"
    elif request.param == "sqlite":
        dsn = f"sqlite:///{tmp_path / 'batches.db'}"
    elif request.param == "postgresql":
        dsn = create_database()
    else:
        redis = pytest.importorskip("redis.asyncio")
        dsn = f"{durable_server().url.rsplit('/', 1)[0]}/{REDIS_DB}"
        client = redis.from_url(dsn)
        try:
            await client.flushdb()
        finally:
            await client.aclose()
    opened = await open_stores(dsn, create=True)
    if request.param == "postgresql":
        await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _ask(workflow: str, generation: int = 1) -> CancelAsk:
    return CancelAsk(
        workflow,
        marker=f"cancel#{generation}",
        value=uuid.uuid4().hex,
        ended=f"cancelled#{generation}",
        superseded=f"resume#{generation + 1}",
    )


async def _admitted(stores: Stores, tenant: str, *names: str) -> list[str]:
    """Start ``names`` of ``tenant`` as a start does: admitted, catalogued, run opened."""
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Admitting)
    assert isinstance(checkpointer, Cataloguing)
    keys = []
    for name in names:
        key = f"{tenant}/{name}"
        await checkpointer.admit(key, "start", {"n": name}, tenant=tenant, caps=NO_CAPS)
        await checkpointer.catalog(key, CatalogEntry(tenant, "job", CREATED_US))
        run = RunRecord(run_id=name, tenant=tenant, agent_name="job", metadata={FOLLOWS: key})
        await stores.state.put_run(run)
        keys.append(key)
    return keys


async def _report(stores: Stores, key: str, status: WorkflowStatus, *, keep: bool = False) -> Pass:
    """``key`` reports ``status`` under a claim, released unless ``keep``."""
    checkpointer = stores.checkpointer
    holder = await checkpointer.claim(key, LONG, LONG)
    assert holder is not None
    await checkpointer.set_status(holder, status, attempts=2)
    if not keep:
        await checkpointer.release(holder)
    return holder


def _cancelling(stores: Stores) -> Cancelling:
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Cancelling)
    return checkpointer


async def test_a_batched_cancel_ends_what_no_pass_runs_and_marks_the_rest(
    stores: Stores,
) -> None:
    checkpointer = stores.checkpointer
    tenant = _tenant()
    pending, blocked, running, parked, done, resumed = await _admitted(
        stores, tenant, "pending", "blocked", "running", "parked", "done", "resumed"
    )
    await _report(stores, blocked, WorkflowStatus.BLOCKED)
    await _report(stores, running, WorkflowStatus.RUNNING, keep=True)
    await _report(stores, parked, WorkflowStatus.PARKED, keep=True)  # a worker reads it
    await _report(stores, done, WorkflowStatus.COMPLETED)
    await checkpointer.supply(resumed, "resume#2", "r")  # a later generation began
    asks = [_ask(w) for w in (pending, blocked, running, parked, done, resumed)]
    outcomes = await _cancelling(stores).cancel_many(asks)
    seen = {o.workflow: (o.status, o.first, o.ended, o.held) for o in outcomes}
    assert seen == {
        pending: (None, True, True, False),
        blocked: (WorkflowStatus.BLOCKED, True, False, False),
        running: (WorkflowStatus.RUNNING, True, False, True),
        parked: (WorkflowStatus.PARKED, True, False, True),
        done: (WorkflowStatus.COMPLETED, False, False, False),
        resumed: (None, True, False, False),
    }
    ended = await checkpointer.get_status(pending)
    assert ended is not None
    assert (ended.status, ended.last_error) == (WorkflowStatus.CANCELLED, "cancelled")
    assert await checkpointer.peek(pending, ["cancel#1", "cancelled#1"]) == {
        "cancel#1": asks[0].value,
        "cancelled#1": "cancelled",
    }
    assert await checkpointer.peek(done, ["cancel#1"]) == {}  # a finished one: no marker
    for key in (blocked, running, parked, resumed):
        assert await checkpointer.peek(key, ["cancelled#1"]) == {}
    assert (await checkpointer.get_status(running)).status is WorkflowStatus.RUNNING  # type: ignore[union-attr]
    # The end moved what a status write moves: the tenant's running count, the catalog's
    # lines and counts, the run record following the workflow.
    assert isinstance(checkpointer, Admitting)
    counts = await checkpointer.tenant_counts(tenant)
    assert (counts.running, counts.started) == (4, 6)  # pending ended, done finished
    assert isinstance(checkpointer, Cataloguing)
    tally = await checkpointer.tally(tenant)
    assert tally[("job", WorkflowStatus.CANCELLED)] == 1
    assert tally[("job", WorkflowStatus.PENDING)] == 1  # the resumed one
    run = await stores.state.get_run(StateKey(tenant=tenant, id="pending"))
    assert run is not None
    assert run.state is RunState.CANCELLED


async def test_a_repeated_batched_cancel_changes_nothing(stores: Stores) -> None:
    tenant = _tenant()
    keys = await _admitted(stores, tenant, "a", "b")
    await _report(stores, keys[1], WorkflowStatus.BLOCKED)
    first = await _cancelling(stores).cancel_many([_ask(k) for k in keys])
    assert [(o.first, o.ended) for o in first] == [(True, True), (True, False)]
    again = await _cancelling(stores).cancel_many([_ask(k) for k in keys])
    assert [(o.status, o.first, o.ended) for o in again] == [
        (WorkflowStatus.CANCELLED, False, False),
        (WorkflowStatus.BLOCKED, False, False),
    ]
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Admitting)
    assert (await checkpointer.tenant_counts(tenant)).running == 1


async def test_a_batched_cancel_fences_out_a_pass_whose_claim_lapsed(stores: Stores) -> None:
    checkpointer = stores.checkpointer
    (key,) = await _admitted(stores, _tenant(), "lapsed")
    holder = await checkpointer.claim(key, LONG, 0.15)
    assert holder is not None
    await asyncio.sleep(0.3)
    (outcome,) = await _cancelling(stores).cancel_many([_ask(key)])
    assert outcome.ended
    with pytest.raises(Fenced):
        await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
    assert (await checkpointer.get_status(key)).status is WorkflowStatus.CANCELLED  # type: ignore[union-attr]


async def test_a_batched_cancel_racing_passes_that_finish_ends_none_of_them(
    stores: Stores,
) -> None:
    """Passes finishing while the batch cancels their workflows (half of them have reported
    nothing yet: pending, but held): each ends completed, whichever comes first; the batch
    ends none of them."""
    checkpointer = stores.checkpointer
    tenant = _tenant()
    keys = await _admitted(stores, tenant, *(f"r{n}" for n in range(40)))
    holders = [await _report(stores, key, WorkflowStatus.RUNNING, keep=True) for key in keys[::2]]
    for key in keys[1::2]:
        holder = await checkpointer.claim(key, LONG, LONG)
        assert holder is not None
        holders.append(holder)

    async def finish(holder: Pass, pause: float) -> None:
        await asyncio.sleep(pause)
        await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
        await checkpointer.release(holder)

    passes = [finish(holder, n * 0.002) for n, holder in enumerate(holders)]
    _, outcomes = await asyncio.gather(
        asyncio.gather(*passes), _cancelling(stores).cancel_many([_ask(k) for k in keys])
    )
    assert not any(outcome.ended for outcome in outcomes)
    for key in keys:
        assert (await checkpointer.get_status(key)).status is WorkflowStatus.COMPLETED  # type: ignore[union-attr]
        assert await checkpointer.peek(key, ["cancelled#1"]) == {}
    assert isinstance(checkpointer, Cataloguing)
    assert await checkpointer.tally(tenant) == {("job", WorkflowStatus.COMPLETED): 40}
    assert isinstance(checkpointer, Admitting)
    assert (await checkpointer.tenant_counts(tenant)).running == 0


async def test_a_batched_look_reads_statuses_keys_and_prefixes(stores: Stores) -> None:
    checkpointer = stores.checkpointer
    tenant = _tenant()
    first, second = await _admitted(stores, tenant, "one", "two")
    await checkpointer.supply(first, "child:a#1", {"id": "a"})
    await checkpointer.supply(first, "child:b#1", {"id": "b"})
    await checkpointer.supply(first, "other", 1)
    await _report(stores, second, WorkflowStatus.BLOCKED)
    looked = await _cancelling(stores).look_many(
        [first, f"{tenant}/nobody", second], ["start", "missing"], ["child:"]
    )
    assert looked[0].info is None
    assert looked[0].records == {
        "start": {"n": "one"},
        "child:a#1": {"id": "a"},
        "child:b#1": {"id": "b"},
    }
    assert (looked[1].info, looked[1].records) == (None, {})
    assert looked[2].info is not None
    assert looked[2].info.status is WorkflowStatus.BLOCKED
    assert looked[2].records == {"start": {"n": "two"}}
    with pytest.raises(InvalidInputError, match="at most"):
        await _cancelling(stores).look_many([first] * (MAX_CANCEL_BATCH + 1), ["start"])


async def test_a_batch_of_starts_is_admitted_woken_and_opened_once(stores: Stores) -> None:
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, AdmittingMany)
    assert isinstance(checkpointer, Admitting)
    tenant = _tenant()
    names = [f"s{n}" for n in range(5)]
    await checkpointer.supply(f"{tenant}/s0", "start", {"n": "earlier"})  # started before
    recorded = await checkpointer.admit_many(
        [Admit(f"{tenant}/{name}", "start", {"n": name}, tenant) for name in names]
    )
    assert [(r.value, r.first) for r in recorded] == [
        ({"n": "earlier"}, False),
        *(({"n": name}, True) for name in names[1:]),
    ]
    assert (await checkpointer.tenant_counts(tenant)).started == 4
    # A repeated start (its record made anew, so unlike the stored one) counts nothing.
    again = await checkpointer.admit_many(
        [Admit(f"{tenant}/{name}", "start", {"n": name, "at": 2}, tenant) for name in names[1:]]
    )
    assert [(r.value, r.first) for r in again] == [({"n": name}, False) for name in names[1:]]
    assert (await checkpointer.tenant_counts(tenant)).started == 4

    state = stores.state
    assert isinstance(state, CreatingRuns)
    await state.put_run(RunRecord(run_id="s1", tenant=tenant, agent_name="mine"))
    runs = [RunRecord(run_id=name, tenant=tenant, agent_name="job") for name in names]
    assert await state.create_runs(runs) == [True, False, True, True, True]
    assert await state.create_runs(runs[:1]) == [False]
    kept = await state.get_run(StateKey(tenant=tenant, id="s1"))
    assert kept is not None
    assert kept.agent_name == "mine"  # the user's own run is left as it was
    made = await state.get_run(StateKey(tenant=tenant, id="s2"))
    assert made is not None
    assert (made.version, made.state) == (1, RunState.PENDING)

    scheduler: Scheduler = stores.durable("job").scheduler
    assert isinstance(scheduler, ReadyingMany)
    await scheduler.make_ready_many(
        [Ready(f"{tenant}/{name}", tenant, None) for name in names]
        + [Ready(f"{tenant}/s0", tenant, int(WorkPriority.URGENT))]  # named twice: the last stands
    )
    await scheduler.cancel_many([f"{tenant}/s1", f"{tenant}/s2"])
    taken = []
    while (delivery := await scheduler.next_ready(0)) is not None:
        taken.append(delivery.workflow)
    assert taken[0] == f"{tenant}/s0"  # its priority, the highest
    assert sorted(taken) == sorted(f"{tenant}/{name}" for name in ("s0", "s3", "s4"))
