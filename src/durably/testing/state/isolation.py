"""Isolation cases of `StateStoreConformance`: tenants, awkward ids and refused input."""

from __future__ import annotations

import math

import pytest
from pydantic import JsonValue

from durably.clock import ManualClock
from durably.errors import InvalidInputError, StateInUseError, StateNotFoundError
from durably.redaction import scrub
from durably.stores.runs import (
    RunRecord,
    RunState,
    SessionRecord,
    StateDelta,
    StateKey,
    StateQuery,
    StateStore,
    ToolCall,
)
from durably.testing.refused import UNSTORABLE_TEXTS, UNUSABLE_IDS
from durably.testing.state.fixtures import StateFixtures, StateStoreFactory, new_run, unique
from durably.testing.state.listing import AWKWARD_IDS, walk
from durably.validation import MAX_DEPTH

# Ids where one is a prefix, a glob or a pattern of another: a store that matched keys by
# pattern or split them on a separator would confuse them.
NEAR_IDS = ("x", "x:", "x*", "x?", "x[ab]", "x%", "x_", "{x}", "x ", "x:y")


def nested(depth: int) -> dict[str, JsonValue]:
    """A dict nesting ``depth`` dicts (itself included) inside one another."""
    value: dict[str, JsonValue] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


class StateIsolationCases(StateFixtures):
    """One tenant never reaches another; every id addresses exactly itself."""

    async def test_a_cascade_never_reaches_another_tenants_runs(
        self, state_store: StateStore, tenant: str
    ) -> None:
        other = unique("other-tenant")
        await state_store.put_session(SessionRecord(session_id="shared", tenant=tenant))
        mine = await state_store.put_run(new_run(tenant, session_id="shared"))
        theirs = [
            await state_store.put_run(new_run(other, session_id="shared", state=state))
            for state in (RunState.RUNNING, RunState.COMPLETED)
        ]
        assert await state_store.delete_session(StateKey(tenant=tenant, id="shared"), cascade=True)
        assert await state_store.get_run(mine.key) is None
        for run in theirs:
            assert await state_store.get_run(run.key) == run
        # Their session was never stored, so deleting it under their tenant finds nothing.
        assert await state_store.delete_session(StateKey(tenant=other, id="shared")) is False

    async def test_a_cursor_from_one_tenants_listing_reveals_nothing_of_another(
        self, state_store: StateStore, tenant: str
    ) -> None:
        other = unique("other-tenant")
        for n in range(3):
            await state_store.put_run(new_run(tenant, f"mine-{n}"))
            await state_store.put_run(new_run(other, f"theirs-{n}"))
        first = await state_store.list_runs(StateQuery(tenant=tenant, limit=1))
        assert first.cursor is not None
        borrowed = await walk(state_store, StateQuery(tenant=other, limit=2, cursor=first.cursor))
        listed = [run for page in borrowed for run in page]
        assert all(run.tenant == other for run in listed)
        assert {run.run_id for run in listed} <= {f"theirs-{n}" for n in range(3)}

    async def test_sessions_of_one_tenant_cannot_be_read_or_overwritten_by_another(
        self, state_store: StateStore, tenant: str
    ) -> None:
        other = unique("other-tenant")
        mine = await state_store.put_session(SessionRecord(session_id="s", tenant=tenant, user="a"))
        assert await state_store.get_session(StateKey(tenant=other, id="s")) is None
        theirs = await state_store.put_session(SessionRecord(session_id="s", tenant=other))
        assert theirs.version == 1
        assert await state_store.delete_session(theirs.key, cascade=True) is True
        assert await state_store.get_session(mine.key) == mine

    async def test_near_ids_are_patched_deleted_and_cascaded_as_exactly_themselves(
        self, state_store: StateStore
    ) -> None:
        tenants = [unique("t") + suffix for suffix in ("", ":", "*")]
        for tenant_id in tenants:
            for run_id in NEAR_IDS:
                await state_store.put_session(SessionRecord(session_id=run_id, tenant=tenant_id))
                await state_store.put_run(new_run(tenant_id, run_id, session_id=run_id))
        target, doomed = tenants[0], "x*"
        patched = await state_store.patch_run(
            StateKey(tenant=target, id="x?"), StateDelta(iterations=7)
        )
        assert (patched.run_id, patched.iterations) == ("x?", 7)
        assert await state_store.delete_run(StateKey(tenant=target, id="x")) is True
        with pytest.raises(StateInUseError) as refused:
            await state_store.delete_session(StateKey(tenant=target, id=doomed))
        assert list(refused.value.live_runs) == [doomed]
        assert await state_store.delete_session(StateKey(tenant=target, id=doomed), cascade=True)
        for tenant_id in tenants:
            for run_id in NEAR_IDS:
                key = StateKey(tenant=tenant_id, id=run_id)
                run = await state_store.get_run(key)
                session = await state_store.get_session(key)
                if tenant_id == target and run_id in ("x", doomed):
                    assert run is None
                else:
                    assert run is not None
                    assert (run.tenant, run.run_id, run.session_id) == (tenant_id, run_id, run_id)
                    expected = 7 if (tenant_id, run_id) == (target, "x?") else 0
                    assert run.iterations == expected
                if tenant_id == target and run_id == doomed:
                    assert session is None
                else:
                    assert session is not None
                    assert (session.tenant, session.session_id) == (tenant_id, run_id)

    async def test_awkward_ids_are_patched_and_deleted_as_exactly_themselves(
        self, state_store: StateStore, tenant: str
    ) -> None:
        for run_id in AWKWARD_IDS:
            await state_store.put_run(new_run(tenant, run_id))
        for n, run_id in enumerate(AWKWARD_IDS):
            merged = await state_store.patch_run(
                StateKey(tenant=tenant, id=run_id), StateDelta(iterations=n + 1)
            )
            assert (merged.run_id, merged.iterations, merged.version) == (run_id, n + 1, 2)
        for run_id in AWKWARD_IDS[::2]:
            assert await state_store.delete_run(StateKey(tenant=tenant, id=run_id)) is True
        page = await state_store.list_runs(StateQuery(tenant=tenant, limit=1000))
        assert [(r.run_id, r.iterations) for r in page.records] == [
            (run_id, n + 1) for n, run_id in enumerate(AWKWARD_IDS) if n % 2
        ]

    async def test_a_scrubbing_store_masks_an_update_too(
        self, state_store_factory: StateStoreFactory, clock: ManualClock, tenant: str
    ) -> None:
        store = await state_store_factory(clock, scrub)
        try:
            secret, mail = "sk-live-9a8b7c6d5e4f3a2b1c0d", "ops@example.org"
            stored = await store.put_run(new_run(tenant))
            call = ToolCall(id="c", name="mail", arguments={"auth": f"key {secret}", "cc": [mail]})
            updated = await store.put_run(stored.model_copy(update={"pending_tool_calls": (call,)}))
            read = await store.get_run(stored.key)
            page = await store.list_runs(StateQuery(tenant=tenant))
            for record in (updated, read, *page.records):
                assert record is not None
                text = record.model_dump_json()
                assert secret not in text
                assert mail not in text
                assert record.masked("c")
        finally:
            await store.close()

    @pytest.mark.parametrize("bad", UNUSABLE_IDS)
    async def test_every_entry_point_refuses_an_unusable_id_and_stores_nothing(
        self, state_store: StateStore, tenant: str, bad: str
    ) -> None:
        # Records built without validation must still be refused at the store's door.
        runs = [
            RunRecord.model_construct(**{**new_run(tenant).__dict__, field: bad})
            for field in ("run_id", "tenant", "session_id", "agent_name")
        ]
        for run in runs:
            with pytest.raises(InvalidInputError):
                await state_store.put_run(run)
        for field in ("session_id", "tenant"):
            values: dict[str, object] = {"session_id": "s", "tenant": tenant, field: bad}
            session = SessionRecord.model_construct(**values)  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError):
                await state_store.put_session(session)
        with pytest.raises(InvalidInputError):
            await state_store.list_runs(StateQuery.model_construct(tenant=bad, limit=50))
        for key in (
            StateKey.model_construct(tenant=tenant, id=bad),
            StateKey.model_construct(tenant=bad, id="x"),
        ):
            with pytest.raises(InvalidInputError):
                await state_store.get_run(key)
            with pytest.raises(InvalidInputError):
                await state_store.patch_run(key, StateDelta(iterations=1))
            with pytest.raises(InvalidInputError):
                await state_store.delete_run(key)
            with pytest.raises(InvalidInputError):
                await state_store.get_session(key)
            with pytest.raises(InvalidInputError):
                await state_store.delete_session(key, cascade=True)
        assert (await state_store.list_runs(StateQuery(tenant=tenant))).records == ()
        assert await state_store.get_session(StateKey(tenant=tenant, id="s")) is None

    @pytest.mark.parametrize("bad", UNSTORABLE_TEXTS)
    async def test_a_record_holding_text_no_backing_can_store_is_refused_and_changes_nothing(
        self, state_store: StateStore, tenant: str, bad: str
    ) -> None:
        kept = await state_store.put_run(new_run(tenant, "kept", metadata={"k": "v"}))
        session = await state_store.put_session(
            SessionRecord(session_id="kept", tenant=tenant, user="u", metadata={"k": "v"})
        )
        run_changes: list[dict[str, object]] = [
            {"metadata": {"k": bad}},
            {"metadata": {bad: "v"}},
            {"metadata": {"k": [1, None, {"deep": [bad]}]}},
            {"awaiting_approval": bad},
            {"pending_tool_calls": (ToolCall(id="c", name="n", arguments={"a": bad}),)},
            {"pending_tool_calls": (ToolCall(id="c", name=bad),)},
            {"pending_tool_calls": (ToolCall(id=bad, name="n"),)},
        ]
        for change in run_changes:
            for run in (kept, new_run(tenant, "fresh")):  # an update and a create
                with pytest.raises(InvalidInputError):
                    await state_store.put_run(run.model_copy(update=change))
        session_changes: list[dict[str, object]] = [
            {"metadata": {"k": bad}},
            {"metadata": {bad: 1}},
            {"user": bad},
            {"runs": ("r", bad)},
        ]
        for change in session_changes:
            fresh = SessionRecord(session_id="fresh", tenant=tenant)
            for record in (session, fresh):
                with pytest.raises(InvalidInputError):
                    await state_store.put_session(record.model_copy(update=change))
        assert await state_store.get_run(kept.key) == kept
        assert await state_store.get_run(StateKey(tenant=tenant, id="fresh")) is None
        assert (await state_store.list_runs(StateQuery(tenant=tenant))).records == (kept,)
        assert await state_store.get_session(session.key) == session
        assert await state_store.get_session(StateKey(tenant=tenant, id="fresh")) is None
        patched = await state_store.patch_run(kept.key, StateDelta(iterations=1))
        assert (patched.version, patched.metadata) == (kept.version + 1, {"k": "v"})

    @pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
    async def test_a_number_json_cannot_hold_is_refused_and_changes_nothing(
        self, state_store: StateStore, tenant: str, bad: float
    ) -> None:
        # JSON has no NaN or infinity: storing one as null (or failing in the datastore)
        # would read back something else than was written.
        kept = await state_store.put_run(new_run(tenant, "kept", metadata={"k": 1.5}))
        session = await state_store.put_session(
            SessionRecord(session_id="kept", tenant=tenant, metadata={"k": 1.5})
        )
        run_changes: list[dict[str, object]] = [
            {"metadata": {"k": bad}},
            {"metadata": {"k": [1, {"deep": [bad]}]}},
            {"pending_tool_calls": (ToolCall(id="c", name="n", arguments={"a": bad}),)},
        ]
        for change in run_changes:
            for run in (kept, new_run(tenant, "fresh")):
                with pytest.raises(InvalidInputError):
                    await state_store.put_run(run.model_copy(update=change))
        for record in (session, SessionRecord(session_id="fresh", tenant=tenant)):
            with pytest.raises(InvalidInputError):
                await state_store.put_session(record.model_copy(update={"metadata": {"k": bad}}))
        assert await state_store.get_run(kept.key) == kept
        assert await state_store.get_run(StateKey(tenant=tenant, id="fresh")) is None
        assert await state_store.get_session(session.key) == session
        assert await state_store.get_session(StateKey(tenant=tenant, id="fresh")) is None

    async def test_a_record_nested_past_the_depth_limit_is_refused_and_the_tenant_stays_readable(
        self, state_store: StateStore, tenant: str
    ) -> None:
        # Stored, a value nested ~250 deep could not be read back (pydantic's JSON parser
        # stops near 200 levels): get_run and every list_runs of the tenant would fail.
        kept = await state_store.put_run(new_run(tenant, "kept", metadata=nested(MAX_DEPTH)))
        deep = nested(250)
        for change in (
            {"metadata": deep},
            {"metadata": {"list": [deep]}},
            {"pending_tool_calls": (ToolCall(id="c", name="n", arguments=deep),)},
        ):
            for run in (kept, new_run(tenant, "fresh")):
                with pytest.raises(InvalidInputError, match="deep"):
                    await state_store.put_run(run.model_copy(update=change))
        with pytest.raises(InvalidInputError, match="deep"):
            await state_store.put_session(
                SessionRecord(session_id="s", tenant=tenant, metadata=deep)
            )
        call = ToolCall(id="c", name="n", arguments=nested(MAX_DEPTH))
        fits = await state_store.put_run(new_run(tenant, "fits", pending_tool_calls=(call,)))
        session = await state_store.put_session(
            SessionRecord(session_id="s", tenant=tenant, metadata=nested(MAX_DEPTH))
        )
        assert await state_store.get_run(kept.key) == kept
        assert await state_store.get_run(fits.key) == fits
        assert await state_store.get_run(StateKey(tenant=tenant, id="fresh")) is None
        assert await state_store.get_session(session.key) == session
        assert (await state_store.list_runs(StateQuery(tenant=tenant))).records == (kept, fits)

    async def test_a_patch_to_another_tenants_run_is_refused_and_changes_nothing(
        self, state_store: StateStore, tenant: str
    ) -> None:
        mine = await state_store.put_run(new_run(tenant, "r"))
        with pytest.raises(StateNotFoundError):
            await state_store.patch_run(
                StateKey(tenant=unique("other"), id="r"), StateDelta(cost_micros=5)
            )
        assert await state_store.get_run(mine.key) == mine


__all__ = ["NEAR_IDS", "StateIsolationCases"]
