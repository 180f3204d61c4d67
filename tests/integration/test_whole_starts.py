"""A workflow's first start in one commit, on the backings whose stores share a database
(SQLite, PostgreSQL): its start record (admitted under its tenant), catalog entry, run
record and wakeup land together or not at all, counted from the store afterwards; and an
App's start through it costs one commit and serves as before."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from durably import App, Context
from durably.errors import ConfigurationError, WorkflowLimitError
from durably.stores.admission import NO_CAPS, Admitting, TenantCaps
from durably.stores.catalog import CatalogEntry, Cataloguing, Line
from durably.stores.opening import Stores, open_stores
from durably.stores.runs import FOLLOWS, RunRecord, RunState, StateDelta, StateKey
from durably.stores.starting import StartingWhole, WholeStart, whole_starter
from durably.stores.work import WorkPriority
from tests.pg_service import create_database
from tests.serving import served

CREATED_US = 1_780_000_000_000_000
KIND = "job"
_DSNS: dict[int, str] = {}


def stores_dsn(stores: Stores) -> str:
    return _DSNS[id(stores)]


@pytest.fixture(params=["sqlite", "postgresql"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    dsn = f"sqlite:///{tmp_path / 'starts.db'}" if request.param == "sqlite" else create_database()
    opened = await open_stores(dsn, create=True)
    _DSNS[id(opened)] = dsn
    if request.param == "postgresql":
        await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


def _starter(stores: Stores) -> StartingWhole:
    starter = whole_starter(stores.durable(KIND))
    assert starter is not None
    return starter


def _start(
    tenant: str, name: str, value: object = None, priority: WorkPriority = WorkPriority.HIGH
) -> WholeStart:
    key = f"{tenant}/{name}"
    return WholeStart(
        workflow=key,
        key="start",
        value={"n": name} if value is None else value,
        tenant=tenant,
        priority=int(priority),
        entry=CatalogEntry(tenant, KIND, CREATED_US),
        run=RunRecord(run_id=name, tenant=tenant, agent_name=KIND, metadata={FOLLOWS: key}),
    )


async def _what_is_stored(stores: Stores, tenant: str, name: str) -> dict[str, Any]:
    """Everything a start writes, read back from the store."""
    checkpointer = stores.checkpointer
    assert isinstance(checkpointer, Admitting)
    assert isinstance(checkpointer, Cataloguing)
    key = f"{tenant}/{name}"
    listed = await checkpointer.listed(Line(tenant=tenant))
    run = await stores.state.get_run(StateKey(tenant=tenant, id=name))
    return {
        "record": (await checkpointer.load(key)).get("start"),
        "entry": [row.entry for row in listed if row.workflow == key],
        "run": None if run is None else (run.agent_name, run.state, run.metadata.get(FOLLOWS)),
        "started": (await checkpointer.tenant_counts(tenant)).started,
    }


async def _ready(stores: Stores) -> list[str]:
    scheduler = stores.durable(KIND).scheduler
    taken = []
    while (delivery := await scheduler.next_ready(0)) is not None:
        taken.append(delivery.workflow)
    return taken


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def test_a_first_start_lands_whole(stores: Stores) -> None:
    tenant = _tenant()
    started = await _starter(stores).start_whole(
        _start(tenant, "a"), caps=NO_CAPS, state=stores.state
    )
    assert (started.recorded.value, started.recorded.first, started.opened) == (
        {"n": "a"},
        True,
        True,
    )
    assert await _what_is_stored(stores, tenant, "a") == {
        "record": {"n": "a"},
        "entry": [CatalogEntry(tenant, KIND, CREATED_US)],
        "run": (KIND, RunState.PENDING, f"{tenant}/a"),
        "started": 1,
    }
    checkpointer: Any = stores.checkpointer
    assert (await checkpointer.tenant_counts(tenant)).running == 1
    assert await _ready(stores) == [f"{tenant}/a"]


async def test_a_whole_start_is_served_at_its_priority(stores: Stores) -> None:
    tenant = _tenant()
    starter = _starter(stores)
    for name, priority in (("low", WorkPriority.LOW), ("urgent", WorkPriority.URGENT)):
        await starter.start_whole(
            _start(tenant, name, priority=priority), caps=NO_CAPS, state=stores.state
        )
    assert await _ready(stores) == [f"{tenant}/urgent", f"{tenant}/low"]


async def test_a_whole_start_wakes_a_scheduler_waiting_elsewhere(stores: Stores) -> None:
    if stores.backing != "postgresql":
        pytest.skip("another process's scheduler is woken by PostgreSQL's notification")
    other = await open_stores(stores_dsn(stores))
    try:
        waiting = asyncio.create_task(other.durable(KIND).scheduler.next_ready(10))
        await asyncio.sleep(0.3)  # listening
        tenant = _tenant()
        began = asyncio.get_running_loop().time()
        await _starter(stores).start_whole(_start(tenant, "a"), caps=NO_CAPS, state=stores.state)
        delivery = await waiting
        assert delivery is not None
        assert delivery.workflow == f"{tenant}/a"
        # Woken by the announcement, not by the scheduler's own poll a second later.
        assert asyncio.get_running_loop().time() - began < 0.5
    finally:
        await other.close()


async def test_a_start_whose_reply_was_lost_after_it_committed_is_its_own(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    if stores.backing != "postgresql":
        pytest.skip("a reply is lost between a PostgreSQL server and its client only")
    import secrets

    tenant = _tenant()
    starter = _starter(stores)
    # The same call tried again (the driver's retry after a lost reply) carries its token.
    monkeypatch.setattr(secrets, "token_hex", lambda n: "retried-call")
    first = await starter.start_whole(_start(tenant, "a"), caps=NO_CAPS, state=stores.state)
    again = await starter.start_whole(_start(tenant, "a"), caps=NO_CAPS, state=stores.state)
    assert (first.opened, again.recorded.first, again.opened) == (True, True, True)
    monkeypatch.undo()
    # Another start with the same record but its own token did not write the run record.
    other = await starter.start_whole(_start(tenant, "a"), caps=NO_CAPS, state=stores.state)
    assert (other.recorded.first, other.opened) == (True, False)
    run = await stores.state.get_run(StateKey(tenant=tenant, id="a"))
    assert run is not None
    assert run.version == 1


async def test_a_start_takes_the_counts_before_the_run_totals(stores: Stores) -> None:
    # A status write locks the catalog's counts, then the run totals (its run's trigger):
    # a start taking them the other way round deadlocked with it.
    if stores.backing != "postgresql":
        pytest.skip("SQLite has one writer at a time")
    import psycopg

    tenant = _tenant()
    starter = _starter(stores)
    await starter.start_whole(_start(tenant, "seed"), caps=NO_CAPS, state=stores.state)
    dsn = stores_dsn(stores)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as setup:
        await setup.execute(  # the run totals row the start's run record moves
            "INSERT INTO durably_run_totals VALUES "
            "(%s, 'pending', hashtext('a') & 7, 0, 0, 0, 0, 0, 0, 0, 0, 0) "
            "ON CONFLICT (tenant, state, shard) DO NOTHING",
            (tenant,),
        )
    async with await psycopg.AsyncConnection.connect(dsn) as holder:
        shard = await (
            await holder.execute("SELECT hashtext(%s) & 15", (f"{tenant}/a",))
        ).fetchone()
        assert shard is not None
        # The counts row the start's entry moves, held as a status write holds it.
        await holder.execute(
            "INSERT INTO durably_workflow_counts (tenant, kind, status, shard, n) "
            "VALUES (%s, %s, 'pending', %s, 0) ON CONFLICT (tenant, kind, status, shard) "
            "DO UPDATE SET n = durably_workflow_counts.n",
            (tenant, KIND, shard[0]),
        )
        starting = asyncio.create_task(
            starter.start_whole(_start(tenant, "a"), caps=NO_CAPS, state=stores.state)
        )
        await asyncio.sleep(0.5)
        assert not starting.done()  # waits on the counts row
        async with await psycopg.AsyncConnection.connect(dsn) as probe:
            # The run totals row the start's run record moves is not held meanwhile.
            locked = await probe.execute(
                "SELECT 1 FROM durably_run_totals WHERE tenant = %s AND state = 'pending' "
                "AND shard = hashtext('a') & 7 FOR UPDATE NOWAIT",
                (tenant,),
            )
            assert await locked.fetchall() == [(1,)]
            await probe.rollback()
        await holder.commit()
    assert (await starting).opened


async def _refuse_wakeups(stores: Stores) -> None:
    """Make the store itself refuse every wakeup written from now on (a trigger on the
    scheduler's table): the last of a start's four writes fails inside the store."""
    if stores.backing == "sqlite":
        database: Any = stores.database
        await database.transaction(
            lambda tx: tx.execute(
                "CREATE TRIGGER refuse_wakeups BEFORE INSERT ON durably_workflow_queue "
                "BEGIN SELECT RAISE(ABORT, 'wakeup refused'); END"
            )
        )
        return
    import psycopg

    async with await psycopg.AsyncConnection.connect(stores_dsn(stores), autocommit=True) as c:
        await c.execute(
            "CREATE FUNCTION refuse_wakeups() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'wakeup refused'; END $$"
        )
        await c.execute(
            "CREATE TRIGGER refuse_wakeups BEFORE INSERT ON durably_workflow_queue "
            "FOR EACH ROW EXECUTE FUNCTION refuse_wakeups()"
        )


@pytest.mark.parametrize("caps", [NO_CAPS, TenantCaps(started=10)], ids=["uncapped", "capped"])
async def test_a_start_refused_at_its_wakeup_leaves_nothing(
    stores: Stores, caps: TenantCaps
) -> None:
    await _refuse_wakeups(stores)
    tenant = _tenant()
    with pytest.raises(Exception, match="wakeup refused"):
        await _starter(stores).start_whole(_start(tenant, "a"), caps=caps, state=stores.state)
    assert await _what_is_stored(stores, tenant, "a") == {
        "record": None,
        "entry": [],
        "run": None,
        "started": 0,
    }
    assert await _ready(stores) == []


async def test_a_repeated_start_writes_nothing_more(stores: Stores) -> None:
    tenant = _tenant()
    starter = _starter(stores)
    await starter.start_whole(_start(tenant, "a"), caps=NO_CAPS, state=stores.state)
    assert await _ready(stores) == [f"{tenant}/a"]
    again = await starter.start_whole(
        _start(tenant, "a", {"n": "again"}), caps=NO_CAPS, state=stores.state
    )
    assert (again.recorded.value, again.recorded.first, again.opened) == ({"n": "a"}, False, False)
    stored = await _what_is_stored(stores, tenant, "a")
    assert (stored["record"], stored["started"]) == ({"n": "a"}, 1)
    run = await stores.state.get_run(StateKey(tenant=tenant, id="a"))
    assert run is not None
    assert run.version == 1
    assert await _ready(stores) == []  # not woken again


async def test_a_repeated_start_of_the_very_same_record_writes_nothing_more(
    stores: Stores,
) -> None:
    # A write of the very bytes stored (a retry; an App's start records each carry a
    # token of their call) is told it matches (``first``), and writes nothing more.
    tenant = _tenant()
    starter = _starter(stores)
    await starter.start_whole(_start(tenant, "a"), caps=NO_CAPS, state=stores.state)
    assert await _ready(stores) == [f"{tenant}/a"]
    await stores.state.patch_run(StateKey(tenant=tenant, id="a"), StateDelta(cost_micros=500))
    again = await starter.start_whole(_start(tenant, "a"), caps=NO_CAPS, state=stores.state)
    assert (again.recorded.first, again.opened) == (True, False)
    run = await stores.state.get_run(StateKey(tenant=tenant, id="a"))
    assert run is not None
    assert (run.version, run.cost_micros) == (2, 500)
    assert await _ready(stores) == []
    assert (await _what_is_stored(stores, tenant, "a"))["started"] == 1


async def test_starts_of_one_id_racing_create_it_once(stores: Stores) -> None:
    tenant = _tenant()
    starter = _starter(stores)
    racing = [_start(tenant, "a", {"n": n}) for n in range(12)]
    started = await asyncio.gather(
        *(starter.start_whole(start, caps=NO_CAPS, state=stores.state) for start in racing)
    )
    firsts = [s for s in started if s.recorded.first]
    assert len(firsts) == 1
    assert firsts[0].opened
    assert {str(s.recorded.value) for s in started} == {str(firsts[0].recorded.value)}
    stored = await _what_is_stored(stores, tenant, "a")
    assert (stored["record"], stored["started"]) == (firsts[0].recorded.value, 1)
    assert len(stored["entry"]) == 1
    assert await _ready(stores) == [f"{tenant}/a"]


async def test_a_run_of_the_tenant_under_the_id_is_left_to_the_caller(stores: Stores) -> None:
    tenant = _tenant()
    await stores.state.put_run(RunRecord(run_id="a", tenant=tenant, agent_name="mine"))
    started = await _starter(stores).start_whole(
        _start(tenant, "a"), caps=NO_CAPS, state=stores.state
    )
    assert (started.recorded.first, started.opened) == (True, False)
    stored = await _what_is_stored(stores, tenant, "a")
    assert stored["run"] == ("mine", RunState.PENDING, None)  # the user's own, as it was
    assert stored["entry"] == [CatalogEntry(tenant, KIND, CREATED_US)]
    assert await _ready(stores) == []  # the caller settles the run, then wakes it


async def test_caps_refuse_a_whole_start_and_nothing_of_it_is_written(stores: Stores) -> None:
    tenant = _tenant()
    starter = _starter(stores)
    caps = TenantCaps(started=1)
    await starter.start_whole(_start(tenant, "a"), caps=caps, state=stores.state)
    with pytest.raises(WorkflowLimitError):
        await starter.start_whole(_start(tenant, "b"), caps=caps, state=stores.state)
    assert await _what_is_stored(stores, tenant, "b") == {
        "record": None,
        "entry": [],
        "run": None,
        "started": 1,
    }
    assert await _ready(stores) == [f"{tenant}/a"]


async def test_a_state_store_of_another_database_is_refused(stores: Stores, tmp_path: Path) -> None:
    other = await open_stores(f"sqlite:///{tmp_path / 'other.db'}", create=True)
    try:
        with pytest.raises(ConfigurationError, match="start_whole"):
            await _starter(stores).start_whole(
                _start(_tenant(), "a"), caps=NO_CAPS, state=other.state
            )
    finally:
        await other.close()


async def test_stores_that_cannot_commit_together_have_no_whole_start() -> None:
    # An App writes a start's parts one at a time there.
    memory = await open_stores("memory://")
    try:
        assert whole_starter(memory.durable(KIND)) is None
    finally:
        await memory.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def app_dsn(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'app.db'}" if request.param == "sqlite" else create_database()


async def test_an_app_start_costs_one_write_and_serves(
    app_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = App(app_dsn)

    @app.step()
    async def double(n: int) -> int:
        return 2 * n

    @app.workflow()
    async def job(ctx: Context, n: int) -> int:
        return await double(n)

    try:
        stores = await app.stores()
        await job.start(0)  # the kind's stores opened
        if stores.backing == "sqlite":
            database: Any = stores.database
            before = database._commits
            handle = await job.start(21, id="one")
            assert database._commits - before == 1
        else:
            from durably.postgres.executor import PsycopgSession

            sent: list[str] = []
            fetch, count = PsycopgSession.fetch, PsycopgSession.count

            async def fetched(session: Any, statement: str, *args: Any) -> Any:
                sent.append(statement)
                return await fetch(session, statement, *args)

            async def counted(session: Any, statement: str, *args: Any) -> Any:
                sent.append(statement)
                return await count(session, statement, *args)

            monkeypatch.setattr(PsycopgSession, "fetch", fetched)
            monkeypatch.setattr(PsycopgSession, "count", counted)
            handle = await job.start(21, id="one")
            monkeypatch.undo()
            assert len(sent) == 1  # one statement, autocommitted: one round trip
        assert handle.created
        async with served(app):
            assert await handle.result(timeout=10) == 42
        run = await stores.state.get_run(StateKey(tenant=handle.tenant, id="one"))
        assert run is not None
        assert run.state == RunState.COMPLETED
    finally:
        await app.close()


async def test_an_app_start_over_a_run_of_the_users_own_keeps_it_and_serves(
    app_dsn: str,
) -> None:
    app = App(app_dsn)

    @app.workflow()
    async def job(ctx: Context, n: int) -> int:
        return n

    try:
        stores = await app.stores()
        tenant = app.tenant
        await stores.state.put_run(RunRecord(run_id="mine", tenant=tenant, agent_name="own"))
        handle = await job.start(7, id="mine")
        async with served(app):
            assert await handle.result(timeout=10) == 7
        kept = await stores.state.get_run(StateKey(tenant=tenant, id="mine"))
        assert kept is not None
        assert kept.agent_name == "own"
    finally:
        await app.close()
