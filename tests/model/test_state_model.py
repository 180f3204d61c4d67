"""The state store in lockstep: compare-and-set writes, patches, deletes, listings and
sessions, every answer the same on memory, SQLite, PostgreSQL and Redis."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule

from durably.memory import MemoryStateStore
from durably.postgres import PostgresStateStore
from durably.redis import RedisStateStore
from durably.sqlite import SqliteStateStore
from durably.stores.runs import (
    RunRecord,
    RunState,
    SessionRecord,
    StateDelta,
    StateKey,
    StatePage,
    StateQuery,
    StateStore,
    ToolCall,
    Usage,
)
from tests.model.lockstep import Backing, Lockstep, Services, canon, drive

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

TENANTS = ("acme", "globex")
RUNS = ("r1", "r2", "r3", "r4")
SESSIONS = ("s1", "s2")
METADATA: tuple[dict[str, Any], ...] = (
    {},
    {"a": 1},
    {"f": 1.5, "big": 1e20, "int": 10**20},
    {"z": -0.0},
    {"nested": {"bb": [1, "x", None, True], "a": {}}},
)
VERSIONS = ("current", "current", "zero", "ahead")


def pages(answer: Any) -> object:
    """Every page of a listing: its records, and whether it had a cursor (cursors are
    opaque, and differ by backing)."""
    return canon([(page.records, page.cursor is not None) for page in answer])


class StateMachine(Lockstep[StateStore]):
    """One `StateStore` per backing, moved in lockstep."""

    def __init__(self, services: Services) -> None:
        super().__init__(services)
        # The version memory holds for each run and session: what "current" writes carry.
        self.versions: dict[tuple[str, str, str], int] = {}

    async def build(self) -> list[Backing[StateStore]]:
        services = self.services
        made: list[Backing[StateStore]] = []
        for name in ("memory", "sqlite", "postgres", "redis"):
            backing: Backing[StateStore] = Backing(name, None)  # type: ignore[arg-type]
            if name == "memory":
                backing.store = MemoryStateStore(backing.clock)
            elif name == "sqlite":
                backing.store = SqliteStateStore(await services.database(), clock=backing.clock)
            elif name == "postgres":
                backing.store = PostgresStateStore(
                    services.pool, clock=backing.clock, tables=await services.tables()
                )
            else:
                backing.store = RedisStateStore(
                    services.redis, clock=backing.clock, key_prefix=services.namespace()
                )
            made.append(backing)
        return made

    def _version(self, kind: str, tenant: str, key: str, choice: str) -> int:
        current = self.versions.get((kind, tenant, key), 0)
        return {"current": current, "zero": 0, "ahead": current + 1}[choice]

    def _note(self, kind: str, tenant: str, key: str, answer: object) -> None:
        if isinstance(answer, RunRecord | SessionRecord):
            self.versions[(kind, tenant, key)] = answer.version
        elif answer is None or answer is True:
            self.versions.pop((kind, tenant, key), None)

    @rule(
        tenant=st.sampled_from(TENANTS),
        run_id=st.sampled_from(RUNS),
        state=st.sampled_from(list(RunState)),
        session=st.sampled_from((None, *SESSIONS)),
        version=st.sampled_from(VERSIONS),
        metadata=st.sampled_from(METADATA),
        calls=st.integers(0, 2),
    )
    def put_run(
        self,
        tenant: str,
        run_id: str,
        state: RunState,
        session: str | None,
        version: str,
        metadata: dict[str, Any],
        calls: int,
    ) -> None:
        record = RunRecord(
            run_id=run_id,
            tenant=tenant,
            agent_name="agent",
            session_id=session,
            state=state,
            version=self._version("run", tenant, run_id, version),
            metadata=metadata,
            pending_tool_calls=tuple(
                ToolCall(id=f"c{n}", name="search", arguments={"q": f"n={n}", "key": "sk-live-abc"})
                for n in range(calls)
            ),
            usage=Usage(input_tokens=calls, requests=1),
            cost_micros=calls * 7,
        )
        answers = self.each(lambda b: b.store.put_run(record), label=f"put_run {run_id}")
        if isinstance(answers[0], RunRecord):
            self._note("run", tenant, run_id, answers[0])

    @rule(
        tenant=st.sampled_from(TENANTS),
        run_id=st.sampled_from(RUNS),
        tokens=st.integers(0, 5),
        cost=st.integers(0, 3),
    )
    def patch_run(self, tenant: str, run_id: str, tokens: int, cost: int) -> None:
        delta = StateDelta(
            usage=Usage(output_tokens=tokens, tool_calls=1),
            cost_micros=cost,
            iterations=1,
            messages_read=tokens,
        )
        key = StateKey(tenant=tenant, id=run_id)
        answers = self.each(lambda b: b.store.patch_run(key, delta), label=f"patch_run {run_id}")
        self._note("run", tenant, run_id, answers[0])

    @rule(tenant=st.sampled_from(TENANTS), run_id=st.sampled_from(RUNS))
    def get_run(self, tenant: str, run_id: str) -> None:
        key = StateKey(tenant=tenant, id=run_id)
        self.each(lambda b: b.store.get_run(key), label=f"get_run {run_id}")

    @rule(tenant=st.sampled_from(TENANTS), run_id=st.sampled_from(RUNS))
    def delete_run(self, tenant: str, run_id: str) -> None:
        key = StateKey(tenant=tenant, id=run_id)
        answers = self.each(lambda b: b.store.delete_run(key), label=f"delete_run {run_id}")
        self._note("run", tenant, run_id, answers[0])

    @rule(
        tenant=st.sampled_from(TENANTS),
        state=st.sampled_from((None, RunState.PENDING, RunState.COMPLETED)),
        before=st.sampled_from((None, None, 0.0, 2.0)),
        limit=st.integers(1, 3),
    )
    def list_runs(
        self, tenant: str, state: RunState | None, before: float | None, limit: int
    ) -> None:
        async def walk(b: Backing[StateStore]) -> list[StatePage]:
            updated_before = None if before is None else b.clock.now() - before
            query = StateQuery(
                tenant=tenant, state=state, updated_before=updated_before, limit=limit
            )
            found = [await b.store.list_runs(query)]
            while found[-1].cursor is not None and len(found) < 10:
                query = query.model_copy(update={"cursor": found[-1].cursor})
                found.append(await b.store.list_runs(query))
            return found

        self.each(walk, pages, label=f"list_runs of {tenant}")

    @rule(after=st.sampled_from((None, "acme", "a", "zzz")), limit=st.integers(1, 3))
    def tenants(self, after: str | None, limit: int) -> None:
        self.each(
            lambda b: b.store.tenants(after=after, limit=limit), label=f"tenants after {after}"
        )

    @rule(
        tenant=st.sampled_from(TENANTS),
        session=st.sampled_from(SESSIONS),
        version=st.sampled_from(VERSIONS),
        runs=st.lists(st.sampled_from(RUNS), max_size=2),
        metadata=st.sampled_from(METADATA),
    )
    def put_session(
        self, tenant: str, session: str, version: str, runs: list[str], metadata: dict[str, Any]
    ) -> None:
        record = SessionRecord(
            session_id=session,
            tenant=tenant,
            user="someone@example.com",
            version=self._version("session", tenant, session, version),
            runs=tuple(runs),
            metadata=metadata,
        )
        answers = self.each(lambda b: b.store.put_session(record), label=f"put_session {session}")
        if isinstance(answers[0], SessionRecord):
            self._note("session", tenant, session, answers[0])

    @rule(tenant=st.sampled_from(TENANTS), session=st.sampled_from(SESSIONS))
    def get_session(self, tenant: str, session: str) -> None:
        key = StateKey(tenant=tenant, id=session)
        self.each(lambda b: b.store.get_session(key), label=f"get_session {session}")

    @rule(
        tenant=st.sampled_from(TENANTS),
        session=st.sampled_from(SESSIONS),
        cascade=st.booleans(),
    )
    def delete_session(self, tenant: str, session: str, cascade: bool) -> None:
        key = StateKey(tenant=tenant, id=session)
        answers = self.each(
            lambda b: b.store.delete_session(key, cascade=cascade),
            label=f"delete_session {session} cascade={cascade}",
        )
        self._note("session", tenant, session, answers[0])
        if cascade and answers[0] is True:
            for run_id in RUNS:  # its runs went too: read their versions afresh
                self.versions.pop(("run", tenant, run_id), None)
            for run_id in RUNS:
                self.get_run(tenant, run_id)
                memory = self.services.run(
                    self.backings[0].store.get_run(StateKey(tenant=tenant, id=run_id))
                )
                if memory is not None:
                    self._note("run", tenant, run_id, memory)

    @rule(seconds=st.sampled_from((0.5, 1.0, 3.0)))
    def advance_clocks(self, seconds: float) -> None:
        self.advance(seconds)


def test_every_backing_answers_a_state_sequence_alike(services: Services) -> None:
    drive(lambda: StateMachine(services), examples=6, steps=25)
