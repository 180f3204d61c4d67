"""Run totals cases of `StateStoreConformance`: the totals a store keeps per tenant equal
what its stored runs add up to, through patches, state changes and deletes."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from durably.errors import InvalidInputError
from durably.stores.runs import (
    RunRecord,
    RunState,
    SessionRecord,
    StateDelta,
    StateKey,
    StateQuery,
    StateStore,
    Usage,
)
from durably.stores.totals import RunTotals
from durably.testing.refused import UNUSABLE_IDS
from durably.testing.state.fixtures import StateFixtures, new_run, unique


async def added_up(store: StateStore, tenant: str) -> RunTotals | None:
    """What ``tenant``'s stored runs add up to, read run by run (None: no run)."""
    page = await store.list_runs(StateQuery(tenant=tenant, limit=1000))
    assert page.cursor is None, "the cases keep a tenant's runs to one page"
    if not page.records:
        return None
    usage = Usage()
    for record in page.records:
        usage += record.usage
    return RunTotals(
        tenant=tenant,
        by_state=dict(Counter(record.state for record in page.records)),
        usage=usage,
        cost_micros=sum(record.cost_micros for record in page.records),
    )


async def kept(store: StateStore, tenant: str) -> RunTotals | None:
    """The totals the store keeps for ``tenant`` (None: it lists none)."""
    found = await store.tenant_totals([tenant])
    assert len(found) <= 1
    return found[0] if found else None


async def move(store: StateStore, key: StateKey, state: RunState) -> RunRecord:
    """The run at ``key`` put again in ``state``."""
    current = await store.get_run(key)
    assert current is not None
    return await store.put_run(current.model_copy(update={"state": state}))


async def stored_before(store: StateStore) -> None:
    """Three runs of tenants a and b, as an upgrade test stores them before the totals."""
    for tenant, run_id, state in (
        ("a", "r1", RunState.RUNNING),
        ("a", "r2", RunState.COMPLETED),
        ("b", "r1", RunState.FAILED),
    ):
        await store.put_run(new_run(tenant, run_id, state=state, cost_micros=5))


async def counted_after(store: StateStore) -> None:
    """That the runs of `stored_before` are counted, once, and a patch after it too."""
    await store.patch_run(
        StateKey(tenant="a", id="r1"), StateDelta(usage=Usage(input_tokens=4), cost_micros=1)
    )
    totals = await store.tenant_totals(["a", "b"])
    assert totals == [await added_up(store, "a"), await added_up(store, "b")]
    assert [(t.runs, t.cost_micros, t.usage.input_tokens) for t in totals] == [
        (2, 11, 4),
        (1, 5, 0),
    ]


USED = StateDelta(usage=Usage(input_tokens=3, output_tokens=5, cached_tokens=1), cost_micros=7)


class StateTotalsCases(StateFixtures):
    """`StateStore.tenant_totals`: exact totals per tenant, kept with every run write."""

    async def test_totals_equal_the_runs_after_concurrent_usage_adds_and_state_changes(
        self, state_store: StateStore, tenant: str
    ) -> None:
        runs = [
            await state_store.put_run(new_run(tenant, state=RunState.RUNNING)) for _ in range(4)
        ]
        await asyncio.gather(*(state_store.patch_run(r.key, USED) for r in runs for _ in range(5)))
        await move(state_store, runs[0].key, RunState.COMPLETED)
        await move(state_store, runs[1].key, RunState.FAILED)
        await state_store.patch_run(runs[1].key, USED)
        totals = await kept(state_store, tenant)
        assert totals == await added_up(state_store, tenant)
        assert totals is not None
        assert totals.runs == 4
        assert totals.by_state == {
            RunState.RUNNING: 2,
            RunState.COMPLETED: 1,
            RunState.FAILED: 1,
        }
        assert totals.usage.input_tokens == 3 * 21
        assert totals.cost_micros == 7 * 21

    async def test_a_second_tenant_reusing_run_ids_keeps_totals_of_its_own(
        self, state_store: StateStore, tenant: str
    ) -> None:
        other = unique("tenant")
        for run_id in ("r1", "r2"):
            await state_store.put_run(new_run(tenant, run_id, cost_micros=10))
        await state_store.put_run(new_run(other, "r1", state=RunState.COMPLETED))
        await state_store.patch_run(StateKey(tenant=other, id="r1"), USED)
        mine, theirs = await kept(state_store, tenant), await kept(state_store, other)
        assert mine == await added_up(state_store, tenant)
        assert theirs == await added_up(state_store, other)
        assert mine is not None
        assert theirs is not None
        assert (mine.runs, mine.cost_micros, mine.usage) == (2, 20, Usage())
        assert (theirs.runs, theirs.cost_micros) == (1, 7)

    async def test_deleted_runs_no_longer_count_in_the_totals(
        self, state_store: StateStore, tenant: str
    ) -> None:
        session = await state_store.put_session(SessionRecord(session_id="s", tenant=tenant))
        kept_run = await state_store.put_run(new_run(tenant, cost_micros=1))
        gone = await state_store.put_run(new_run(tenant, cost_micros=100))
        for _ in range(2):
            await state_store.put_run(
                new_run(tenant, session_id="s", state=RunState.COMPLETED, cost_micros=1000)
            )
        await state_store.patch_run(gone.key, USED)
        assert await state_store.delete_run(gone.key)
        assert await state_store.delete_session(session.key, cascade=True)
        totals = await kept(state_store, tenant)
        assert totals == await added_up(state_store, tenant)
        assert totals is not None
        assert (totals.runs, totals.cost_micros, totals.usage) == (1, 1, Usage())
        assert await state_store.delete_run(kept_run.key)
        assert await kept(state_store, tenant) is None

    async def test_totals_of_every_tenant_list_those_with_runs_in_code_point_order(
        self, state_store: StateStore
    ) -> None:
        head = f"totals-{uuid.uuid4().hex[:10]}-"
        for name in ("b", "a", "é", "c"):
            await state_store.put_run(new_run(head + name, cost_micros=len(name)))
        emptied = await state_store.put_run(new_run(head + "a0"))
        await state_store.delete_run(emptied.key)
        first = await state_store.tenant_totals(after=head, limit=2)
        assert [t.tenant for t in first] == [head + "a", head + "b"]
        rest = await state_store.tenant_totals(after=head + "b", limit=2)
        assert [t.tenant for t in rest] == [head + "c", head + "é"]
        assert rest[1].cost_micros == 1
        named = await state_store.tenant_totals([head + "é", head + "a0", head + "a"])
        assert [t.tenant for t in named] == [head + "a", head + "é"]

    @pytest.mark.parametrize(
        ("tenants", "after", "limit", "named"),
        [
            (None, None, 0, "limit"),
            (None, None, 1001, "limit"),
            ("acme", None, 10, "tenants"),
            (["a", "b", "c"], None, 2, "tenants"),
            (["a"], "a", 10, "after"),
            *((["ok", bad], None, 10, "tenants") for bad in UNUSABLE_IDS[:3]),
            (None, "", 10, "after"),
        ],
    )
    async def test_a_bad_totals_request_is_refused_naming_its_argument(
        self,
        state_store: StateStore,
        tenants: object,
        after: str | None,
        limit: int,
        named: str,
    ) -> None:
        with pytest.raises(InvalidInputError, match=named):
            await state_store.tenant_totals(tenants, after=after, limit=limit)  # type: ignore[arg-type]


__all__ = ["StateTotalsCases", "added_up", "counted_after", "stored_before"]
