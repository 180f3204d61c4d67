"""Session cases of `StateStoreConformance`: compare-and-set and guarded deletion."""

from __future__ import annotations

import asyncio

import pytest

from durably.clock import ManualClock
from durably.errors import StateConflictError, StateInUseError
from durably.stores.runs import RunState, SessionRecord, StateKey, StateStore
from durably.testing.state.fixtures import START, StateFixtures, new_run, unique


def new_session(tenant: str, session_id: str | None = None, **fields: object) -> SessionRecord:
    """A never-stored session of ``tenant`` (version 0)."""
    return SessionRecord(
        session_id=unique("session") if session_id is None else session_id, tenant=tenant, **fields
    )


class StateSessionCases(StateFixtures):
    """Sessions: compare-and-set writes, and deletion guarded by the runs that name them."""

    async def test_a_missing_session_reads_as_none_and_deleting_it_returns_false(
        self, state_store: StateStore, tenant: str
    ) -> None:
        key = StateKey(tenant=tenant, id="nobody")
        assert await state_store.get_session(key) is None
        assert await state_store.delete_session(key) is False
        assert await state_store.delete_session(key, cascade=True) is False

    async def test_a_session_is_written_compare_and_set_with_its_fields_verbatim(
        self, state_store: StateStore, tenant: str, clock: ManualClock
    ) -> None:
        clock.advance(1)
        session = new_session(tenant, user="ada", runs=("r2", "r1"), metadata={"topic": "é ✓"})
        first = await state_store.put_session(session)
        assert (first.version, first.updated_at) == (1, START + 1)
        assert await state_store.get_session(session.key) == first
        assert first.model_copy(update={"version": 0, "updated_at": 0.0}) == session
        second = await state_store.put_session(first.model_copy(update={"runs": ("r3",)}))
        assert second.version == 2
        with pytest.raises(StateConflictError) as stale:
            await state_store.put_session(first.model_copy(update={"user": "eve"}))
        assert (stale.value.expected_version, stale.value.actual_version) == (1, 2)
        with pytest.raises(StateConflictError) as create:
            await state_store.put_session(session)
        assert (create.value.expected_version, create.value.actual_version) == (0, 2)
        with pytest.raises(StateConflictError) as absent:
            await state_store.put_session(new_session(tenant, version=4))
        assert (absent.value.expected_version, absent.value.actual_version) == (4, 0)
        assert await state_store.get_session(session.key) == second

    async def test_of_twenty_concurrent_session_creates_exactly_one_wins(
        self, state_store: StateStore, tenant: str
    ) -> None:
        results = await asyncio.gather(
            *(state_store.put_session(new_session(tenant, "s", user=f"u{n}")) for n in range(20)),
            return_exceptions=True,
        )
        winners = [r for r in results if isinstance(r, SessionRecord)]
        assert len(winners) == 1
        assert sum(isinstance(r, StateConflictError) for r in results) == 19

    async def test_a_session_with_a_live_run_cannot_be_deleted(
        self, state_store: StateStore, tenant: str
    ) -> None:
        session = await state_store.put_session(new_session(tenant))
        live = await state_store.put_run(
            new_run(tenant, "live", session_id=session.session_id, state=RunState.RUNNING)
        )
        pending = await state_store.put_run(
            new_run(tenant, "pending", session_id=session.session_id)
        )
        done = await state_store.put_run(
            new_run(tenant, "done", session_id=session.session_id, state=RunState.COMPLETED)
        )
        with pytest.raises(StateInUseError) as refused:
            await state_store.delete_session(session.key)
        assert sorted(refused.value.live_runs) == ["live", "pending"]
        assert await state_store.get_session(session.key) == session
        for run in (live, pending, done):
            assert await state_store.get_run(run.key) == run

    async def test_a_refused_deletion_names_the_live_runs_in_creation_order(
        self, state_store: StateStore, tenant: str
    ) -> None:
        session = await state_store.put_session(new_session(tenant))
        for run_id in ("zeta", "mid", "alpha", "done"):
            state = RunState.COMPLETED if run_id == "done" else RunState.RUNNING
            await state_store.put_run(
                new_run(tenant, run_id, session_id=session.session_id, state=state)
            )
        with pytest.raises(StateInUseError) as refused:
            await state_store.delete_session(session.key)
        assert refused.value.live_runs == ("zeta", "mid", "alpha")

    async def test_cascade_deletes_the_session_and_every_one_of_its_runs(
        self, state_store: StateStore, tenant: str
    ) -> None:
        session = await state_store.put_session(new_session(tenant))
        other = await state_store.put_run(new_run(tenant, "elsewhere", state=RunState.RUNNING))
        runs = [
            await state_store.put_run(new_run(tenant, session_id=session.session_id, state=state))
            for state in (RunState.RUNNING, RunState.SUSPENDED, RunState.FAILED)
        ]
        assert await state_store.delete_session(session.key, cascade=True) is True
        assert await state_store.get_session(session.key) is None
        for run in runs:
            assert await state_store.get_run(run.key) is None
        assert await state_store.get_run(other.key) == other

    async def test_finished_runs_do_not_hold_a_session_open_and_stay_readable(
        self, state_store: StateStore, tenant: str
    ) -> None:
        session = await state_store.put_session(new_session(tenant))
        finished = [
            await state_store.put_run(new_run(tenant, session_id=session.session_id, state=state))
            for state in (
                RunState.COMPLETED,
                RunState.FAILED,
                RunState.CANCELLED,
                RunState.BUDGET_EXHAUSTED,
                RunState.MAX_ITERATIONS_EXCEEDED,
                RunState.LOOP_LIMIT_EXCEEDED,
            )
        ]
        assert await state_store.delete_session(session.key) is True
        assert await state_store.get_session(session.key) is None
        for run in finished:
            assert await state_store.get_run(run.key) == run

    async def test_a_run_that_finished_or_left_no_longer_holds_its_session(
        self, state_store: StateStore, tenant: str
    ) -> None:
        session = await state_store.put_session(new_session(tenant))
        sid = session.session_id
        finishing = await state_store.put_run(new_run(tenant, session_id=sid))
        leaving = await state_store.put_run(new_run(tenant, session_id=sid))
        deleted = await state_store.put_run(new_run(tenant, session_id=sid))
        with pytest.raises(StateInUseError):
            await state_store.delete_session(session.key)
        await state_store.put_run(finishing.model_copy(update={"state": RunState.COMPLETED}))
        await state_store.put_run(leaving.model_copy(update={"session_id": None}))
        await state_store.delete_run(deleted.key)
        assert await state_store.delete_session(session.key) is True
        left = await state_store.get_run(leaving.key)
        assert left is not None
        assert left.state is RunState.PENDING

    async def test_the_runs_a_session_lists_do_not_decide_its_deletion(
        self, state_store: StateStore, tenant: str
    ) -> None:
        # Only a run's own session_id ties it to a session; `runs` is the caller's data.
        stranger = await state_store.put_run(new_run(tenant, state=RunState.RUNNING))
        session = await state_store.put_session(new_session(tenant, runs=(stranger.run_id,)))
        assert await state_store.delete_session(session.key, cascade=True) is True
        assert await state_store.get_run(stranger.key) == stranger

    async def test_sessions_are_isolated_by_tenant(
        self, state_store: StateStore, tenant: str
    ) -> None:
        other = unique("other-tenant")
        mine = await state_store.put_session(new_session(tenant, "shared", user="me"))
        theirs = await state_store.put_session(new_session(other, "shared", user="them"))
        assert theirs.version == 1
        await state_store.put_run(new_run(other, session_id="shared", state=RunState.RUNNING))
        assert await state_store.delete_session(mine.key) is True
        assert await state_store.get_session(theirs.key) == theirs
        with pytest.raises(StateInUseError):
            await state_store.delete_session(theirs.key)


__all__ = ["StateSessionCases", "new_session"]
