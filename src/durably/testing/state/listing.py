"""Listing, tenant isolation and identifier cases of `StateStoreConformance`."""

from __future__ import annotations

import asyncio
import math

import pytest

from durably.clock import ManualClock
from durably.errors import InvalidInputError, StateNotFoundError
from durably.stores.runs import (
    RunRecord,
    RunState,
    SessionRecord,
    StateDelta,
    StateKey,
    StateQuery,
    StateStore,
)
from durably.testing.refused import UNUSABLE_IDS
from durably.testing.state.fixtures import START, StateFixtures, new_run, unique

AWKWARD_IDS = (
    "{braces}",
    "{4:acme}",
    "a:b",
    "a",
    "b:c",
    'quote"d',
    "it's",
    "semi;colon",
    "100%",
    "%s%d",
    "with space",
    " ",
    "emoji 🚀🔥",
    "back\\slash",
    "line\nbreak",
    "'; DROP TABLE runs; --",
    "*",
    "run_%",
)


async def walk(store: StateStore, query: StateQuery) -> list[list[RunRecord]]:
    """Every page of ``query``, following cursors until the last page."""
    pages: list[list[RunRecord]] = []
    while True:
        page = await store.list_runs(query)
        pages.append(list(page.records))
        if page.cursor is None:
            return pages
        assert len(pages) < 100, "the cursor never ran out"
        query = query.model_copy(update={"cursor": page.cursor})


class StateListingCases(StateFixtures):
    """Listing in creation order, tenant isolation and arbitrary identifiers."""

    async def test_an_empty_tenant_lists_one_empty_page_without_a_cursor(
        self, state_store: StateStore, tenant: str
    ) -> None:
        page = await state_store.list_runs(StateQuery(tenant=tenant))
        assert (page.records, page.cursor) == ((), None)

    @pytest.mark.parametrize(
        "cursor", ["", "abc", "-1", " 1", "1 ", "+1", "1_0", "1.5", "\u0661", "9" * 23]
    )
    async def test_a_cursor_no_store_hands_out_is_refused_alike(
        self, state_store: StateStore, tenant: str, cursor: str
    ) -> None:
        # Cursors are decimal positions; whatever else int() would parse (signs, spaces,
        # underscores, other scripts' digits) or no backing can hold is InvalidInputError.
        await state_store.put_run(new_run(tenant))
        with pytest.raises(InvalidInputError):
            await state_store.list_runs(StateQuery(tenant=tenant, cursor=cursor))

    async def test_an_update_time_bound_that_is_not_a_number_is_refused(
        self, state_store: StateStore, tenant: str
    ) -> None:
        # NaN compares false in Python and Lua but greater than every number in
        # PostgreSQL, and SQLite binds it as NULL: each backing would list something else.
        await state_store.put_run(new_run(tenant))
        with pytest.raises(ValueError, match="updated_before"):
            StateQuery(tenant=tenant, updated_before=math.nan)
        query = StateQuery.model_construct(tenant=tenant, updated_before=math.nan, limit=50)
        with pytest.raises(InvalidInputError):
            await state_store.list_runs(query)
        for bound, listed in ((math.inf, 1), (-math.inf, 0)):
            page = await state_store.list_runs(StateQuery(tenant=tenant, updated_before=bound))
            assert len(page.records) == listed

    async def test_a_cursor_walks_every_run_exactly_once_in_creation_order(
        self, state_store: StateStore, tenant: str, clock: ManualClock
    ) -> None:
        ids = [f"run-{n}" for n in (3, 1, 4, 0, 2)]  # creation order differs from id order
        for run_id in ids:
            await state_store.put_run(new_run(tenant, run_id))
            clock.advance(1)
        pages = await walk(state_store, StateQuery(tenant=tenant, limit=2))
        assert [len(page) for page in pages] == [2, 2, 1]
        assert [run.run_id for page in pages for run in page] == ids

    async def test_a_cursor_tells_a_tenant_nothing_about_other_tenants_runs(
        self, state_store: StateStore, tenant: str
    ) -> None:
        # A tenant whose runs were created while others wrote gets the very same cursors as
        # one whose runs were created alone: a cursor is a place among its own runs.
        quiet, busy, other = unique("quiet"), unique("busy"), unique("other")
        for run_id in ("a", "b", "c"):
            await state_store.put_run(new_run(quiet, run_id))
        for run_id in ("a", "b", "c"):
            await state_store.put_run(new_run(busy, run_id))
            for n in range(7):
                await state_store.put_run(new_run(other, f"{run_id}{n}"))
        await state_store.delete_run(StateKey(tenant=other, id="a0"))

        async def cursors(owner: str) -> list[str | None]:
            found: list[str | None] = []
            query = StateQuery(tenant=owner, limit=1)
            while True:
                page = await state_store.list_runs(query)
                found.append(page.cursor)
                if page.cursor is None:
                    return found
                query = query.model_copy(update={"cursor": page.cursor})

        assert await cursors(busy) == await cursors(quiet)
        # Another tenant's cursor is a place among the caller's own runs, nothing more.
        first = await state_store.list_runs(StateQuery(tenant=other, limit=1))
        mine = await state_store.list_runs(StateQuery(tenant=quiet, cursor=first.cursor))
        assert {run.tenant for run in mine.records} <= {quiet}

    async def test_runs_created_concurrently_are_each_listed_exactly_once(
        self, state_store: StateStore, tenant: str
    ) -> None:
        ids = [f"r{n:02d}" for n in range(20)]
        await asyncio.gather(*(state_store.put_run(new_run(tenant, run_id)) for run_id in ids))
        pages = await walk(state_store, StateQuery(tenant=tenant, limit=3))
        listed = [run.run_id for page in pages for run in page]
        assert sorted(listed) == ids
        assert [len(page) for page in pages] == [3] * 6 + [2]

    async def test_the_last_page_has_no_cursor_even_when_it_is_full(
        self, state_store: StateStore, tenant: str
    ) -> None:
        for n in range(4):
            await state_store.put_run(new_run(tenant, f"r{n}"))
        first = await state_store.list_runs(StateQuery(tenant=tenant, limit=2))
        assert first.cursor is not None
        second = await state_store.list_runs(
            StateQuery(tenant=tenant, limit=2, cursor=first.cursor)
        )
        assert [run.run_id for run in second.records] == ["r2", "r3"]
        assert second.cursor is None
        whole = await state_store.list_runs(StateQuery(tenant=tenant, limit=4))
        assert (len(whole.records), whole.cursor) == (4, None)

    async def test_a_page_is_never_short_while_matches_remain(
        self, state_store: StateStore, tenant: str
    ) -> None:
        for n in range(12):
            state = RunState.RUNNING if n % 3 == 0 else RunState.COMPLETED
            await state_store.put_run(new_run(tenant, f"r{n:02d}", state=state))
        pages = await walk(state_store, StateQuery(tenant=tenant, state=RunState.RUNNING, limit=3))
        assert [len(page) for page in pages] == [3, 1]
        assert [run.run_id for page in pages for run in page] == ["r00", "r03", "r06", "r09"]
        done = await walk(state_store, StateQuery(tenant=tenant, state=RunState.COMPLETED, limit=5))
        assert [len(page) for page in done] == [5, 3]

    async def test_listing_filters_by_strictly_earlier_update_time(
        self, state_store: StateStore, tenant: str, clock: ManualClock
    ) -> None:
        for n in range(4):
            await state_store.put_run(new_run(tenant, f"r{n}"))
            clock.advance(10)
        query = StateQuery(tenant=tenant, updated_before=START + 20)
        pages = await walk(state_store, query.model_copy(update={"limit": 1}))
        assert [run.run_id for page in pages for run in page] == ["r0", "r1"]

    async def test_listing_combines_state_and_update_time(
        self, state_store: StateStore, tenant: str, clock: ManualClock
    ) -> None:
        for n in range(6):
            state = RunState.SUSPENDED if n % 2 else RunState.RUNNING
            await state_store.put_run(new_run(tenant, f"r{n}", state=state))
            clock.advance(1)
        query = StateQuery(
            tenant=tenant, state=RunState.SUSPENDED, updated_before=START + 4, limit=1
        )
        pages = await walk(state_store, query)
        assert [run.run_id for page in pages for run in page] == ["r1", "r3"]

    async def test_an_update_never_moves_a_run_in_the_order(
        self, state_store: StateStore, tenant: str, clock: ManualClock
    ) -> None:
        runs = [await state_store.put_run(new_run(tenant, f"r{n}")) for n in range(4)]
        first = await state_store.list_runs(StateQuery(tenant=tenant, limit=2))
        clock.advance(5)
        await state_store.put_run(runs[0].model_copy(update={"state": RunState.RUNNING}))
        await state_store.patch_run(runs[1].key, StateDelta(iterations=1))
        rest = await walk(state_store, StateQuery(tenant=tenant, limit=2, cursor=first.cursor))
        assert [run.run_id for page in rest for run in page] == ["r2", "r3"]
        again = await walk(state_store, StateQuery(tenant=tenant, limit=10))
        assert [run.run_id for page in again for run in page] == ["r0", "r1", "r2", "r3"]

    async def test_listing_returns_records_as_stored(
        self, state_store: StateStore, tenant: str
    ) -> None:
        stored = await state_store.put_run(new_run(tenant, metadata={"k": "v"}))
        patched = await state_store.patch_run(stored.key, StateDelta(cost_micros=3))
        page = await state_store.list_runs(StateQuery(tenant=tenant))
        assert page.records == (patched,)

    async def test_tenants_cannot_read_list_patch_or_delete_each_others_runs(
        self, state_store: StateStore, tenant: str
    ) -> None:
        other = unique("other-tenant")
        mine = await state_store.put_run(new_run(tenant, "shared-id", agent_name="mine"))
        theirs_key = StateKey(tenant=other, id="shared-id")
        assert await state_store.get_run(theirs_key) is None
        assert (await state_store.list_runs(StateQuery(tenant=other))).records == ()
        with pytest.raises(StateNotFoundError):
            await state_store.patch_run(theirs_key, StateDelta(iterations=1))
        assert await state_store.delete_run(theirs_key) is False
        theirs = await state_store.put_run(new_run(other, "shared-id", agent_name="theirs"))
        assert theirs.version == 1
        await state_store.patch_run(theirs_key, StateDelta(iterations=5))
        assert await state_store.get_run(mine.key) == mine
        assert await state_store.delete_run(mine.key) is True
        still = await state_store.get_run(theirs_key)
        assert still is not None
        assert (still.agent_name, still.iterations) == ("theirs", 5)
        listed = await state_store.list_runs(StateQuery(tenant=other))
        assert [run.agent_name for run in listed.records] == ["theirs"]

    async def test_awkward_ids_address_exactly_themselves(
        self, state_store: StateStore, tenant: str
    ) -> None:
        for tenant_id in (tenant, *AWKWARD_IDS[:6]):
            for run_id in AWKWARD_IDS:
                await state_store.put_run(
                    new_run(tenant_id, run_id, agent_name=f"{tenant_id}|{run_id}")
                )
        for tenant_id in (tenant, *AWKWARD_IDS[:6]):
            for run_id in AWKWARD_IDS:
                run = await state_store.get_run(StateKey(tenant=tenant_id, id=run_id))
                assert run is not None
                assert (run.tenant, run.run_id, run.agent_name) == (
                    tenant_id,
                    run_id,
                    f"{tenant_id}|{run_id}",
                )
            page = await state_store.list_runs(StateQuery(tenant=tenant_id, limit=1000))
            assert [run.run_id for run in page.records] == list(AWKWARD_IDS)

    async def test_near_colliding_keys_stay_apart(self, state_store: StateStore) -> None:
        base = unique("t")
        pairs = [(base, "b:c"), (f"{base}:b", "c"), (base, "b"), (f"{base}:", "b")]
        for tenant_id, run_id in pairs:
            await state_store.put_run(
                new_run(tenant_id, run_id, agent_name=f"{tenant_id}|{run_id}")
            )
        await state_store.delete_run(StateKey(tenant=base, id="b"))
        assert await state_store.get_run(StateKey(tenant=base, id="b")) is None
        for tenant_id, run_id in pairs[:2] + pairs[3:]:
            run = await state_store.get_run(StateKey(tenant=tenant_id, id=run_id))
            assert run is not None
            assert run.agent_name == f"{tenant_id}|{run_id}"

    async def test_awkward_session_ids_address_exactly_themselves(
        self, state_store: StateStore, tenant: str
    ) -> None:
        for session_id in AWKWARD_IDS:
            await state_store.put_session(
                SessionRecord(session_id=session_id, tenant=tenant, user=session_id)
            )
        await state_store.put_run(new_run(tenant, session_id="a:b", state=RunState.RUNNING))
        assert await state_store.delete_session(StateKey(tenant=tenant, id="a")) is True
        for session_id in AWKWARD_IDS:
            stored = await state_store.get_session(StateKey(tenant=tenant, id=session_id))
            if session_id == "a":
                assert stored is None
            else:
                assert stored is not None
                assert stored.user == session_id

    async def test_unusable_ids_are_refused_before_any_io(
        self, state_store: StateStore, tenant: str
    ) -> None:
        for bad in UNUSABLE_IDS:
            with pytest.raises(ValueError):
                StateKey(tenant=tenant, id=bad)
            with pytest.raises(ValueError):
                StateKey(tenant=bad, id="x")
            with pytest.raises(ValueError):
                new_run(tenant, bad)
            with pytest.raises(ValueError):
                new_run(bad)
            with pytest.raises(ValueError):
                SessionRecord(session_id=bad, tenant=tenant)
            with pytest.raises(ValueError):
                StateQuery(tenant=bad)
            # A key built without validation is still refused at the store's door.
            key = StateKey.model_construct(tenant=tenant, id=bad)
            with pytest.raises(InvalidInputError):
                await state_store.get_run(key)
            with pytest.raises(InvalidInputError):
                await state_store.delete_run(key)
            with pytest.raises(InvalidInputError):
                await state_store.patch_run(key, StateDelta(iterations=1))
            with pytest.raises(InvalidInputError):
                await state_store.get_session(key)
            with pytest.raises(InvalidInputError):
                await state_store.delete_session(key)
        assert (await state_store.list_runs(StateQuery(tenant=tenant))).records == ()

    async def test_tenants_lists_every_tenant_with_runs_once_in_code_point_order(
        self, state_store: StateStore
    ) -> None:
        base = unique("tenants")
        names = [f"{base}:{suffix}" for suffix in ("b", "a", "é", "🚀", "{x}", "*", "a b")]
        for name in names:
            for n in range(2):
                await state_store.put_run(new_run(name, f"r{n}"))
        listed = [t for t in await state_store.tenants(limit=10_000) if t.startswith(base)]
        assert listed == sorted(names)
        after = sorted(names)[2]
        later = [t for t in await state_store.tenants(after=after, limit=10_000)]
        assert [t for t in later if t.startswith(base)] == sorted(names)[3:]
        assert all(t > after for t in later)
        assert len(await state_store.tenants(after=base, limit=2)) <= 2
        await state_store.delete_run(StateKey(tenant=names[0], id="r0"))
        await state_store.delete_run(StateKey(tenant=names[0], id="r1"))
        listed = [t for t in await state_store.tenants(limit=10_000) if t.startswith(base)]
        assert listed == sorted(names[1:])

    @pytest.mark.parametrize("bad", [{"limit": 0}, {"limit": 10_001}, {"after": ""}])
    async def test_tenants_refuses_a_bad_page_before_any_io(
        self, state_store: StateStore, bad: dict[str, object]
    ) -> None:
        with pytest.raises(InvalidInputError):
            await state_store.tenants(**bad)  # type: ignore[arg-type]


__all__ = ["AWKWARD_IDS", "StateListingCases", "walk"]
