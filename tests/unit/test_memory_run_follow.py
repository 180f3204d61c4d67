"""The memory store's run records moved by their workflow's status writes (`follow`)."""

from __future__ import annotations

from durably.app._runs import opened_run
from durably.clock import ManualClock
from durably.memory.state import MemoryStateStore
from durably.stores.runs import FOLLOWS, RunState, StateDelta, StateKey, StateQuery, Usage

KEY = StateKey(tenant="acme", id="order-1")


async def _opened(store: MemoryStateStore) -> None:
    await store.put_run(opened_run("acme", "order-1", "checkout", "acme/order-1"))


async def test_a_followed_run_reads_back_in_each_state_its_workflow_reported() -> None:
    clock = ManualClock(100.0)
    store = MemoryStateStore(clock)
    await _opened(store)
    clock.advance(5.0)
    store.follow("acme", "acme/order-1", RunState.RUNNING)
    running = await store.get_run(KEY)
    store.follow("acme", "acme/order-1", RunState.RUNNING)  # already there: no new version
    store.follow("acme", "acme/order-1", RunState.COMPLETED)
    done = await store.get_run(KEY)
    assert running is not None
    assert done is not None
    assert (running.state, running.version) == (RunState.RUNNING, 2)
    assert (done.state, done.version) == (RunState.COMPLETED, 3)
    assert done.updated_at == 100.0  # the record's own last write, not the status write's
    page = await store.list_runs(StateQuery(tenant="acme", state=RunState.COMPLETED))
    assert [record.run_id for record in page.records] == ["order-1"]
    [totals] = await store.tenant_totals(["acme"])
    assert totals.by_state.get(RunState.COMPLETED) == 1
    assert not totals.by_state.get(RunState.PENDING)
    assert not totals.by_state.get(RunState.RUNNING)


async def test_changing_a_returned_run_changes_nothing_the_store_follows() -> None:
    store = MemoryStateStore(ManualClock(100.0))
    saved = await store.put_run(opened_run("acme", "order-1", "checkout", "acme/order-1"))
    saved.metadata[FOLLOWS] = "acme/another"  # the caller's copy, mutable inside
    store.follow("acme", "acme/order-1", RunState.RUNNING)
    read = await store.get_run(KEY)
    assert read is not None
    read.metadata[FOLLOWS] = "acme/another"
    store.follow("acme", "acme/order-1", RunState.FAILED)
    again = await store.get_run(KEY)
    assert again is not None
    assert again.metadata == {FOLLOWS: "acme/order-1"}
    assert (again.state, again.version) == (RunState.FAILED, 3)


async def test_a_run_patched_and_put_after_its_workflow_moved_it_keeps_the_moved_state() -> None:
    store = MemoryStateStore(ManualClock(100.0))
    await _opened(store)
    store.follow("acme", "acme/order-1", RunState.RUNNING)
    patched = await store.patch_run(KEY, StateDelta(usage=Usage(input_tokens=7)))
    assert (patched.state, patched.version, patched.usage.input_tokens) == (RunState.RUNNING, 3, 7)
    put = await store.put_run(patched.model_copy(update={"iterations": 2}))
    store.follow("acme", "acme/order-1", RunState.COMPLETED)
    read = await store.get_run(KEY)
    assert read is not None
    assert (read.state, read.version, read.iterations) == (RunState.COMPLETED, put.version + 1, 2)
    [totals] = await store.tenant_totals(["acme"])
    assert totals.usage.input_tokens == 7
    assert totals.by_state.get(RunState.COMPLETED) == 1
