"""Operating workflows through the App: listing by filter with cursors bound to the filter,
counts, bulk cancel while workers serve, fork from each kind of step, and the bad input
the operations refuse before changing anything."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from durably import App, Context, ManualClock, Topic, WorkflowStatus
from durably.errors import InvalidInputError
from tests.pg_service import create_database
from tests.redis_service import durable_server

REDIS_DB = 12
GO = Topic("go", str)


async def _dsn(backing: str, tmp_path: Path) -> str:
    if backing == "memory":
        return "memory://"
    if backing == "sqlite":
        return f"sqlite:///{tmp_path / 'ops.db'}"
    if backing == "postgresql":
        return create_database()
    redis = pytest.importorskip("redis.asyncio")
    url = f"{durable_server().url.rsplit('/', 1)[0]}/{REDIS_DB}"
    client = redis.from_url(url)
    try:
        await client.flushdb()
    finally:
        await client.aclose()
    return url


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
async def dsn(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return await _dsn(request.param, tmp_path)


class Ledger:
    """What the steps did, counted from outside the store."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def count(self, name: str) -> int:
        return sum(1 for call, _ in self.calls if call == name)


def _app(dsn: str, ledger: Ledger, clock: ManualClock | None = None) -> tuple[App, Any, Any]:
    app = App(dsn, clock=clock or ManualClock())

    @app.step(name="plain")
    async def plain(x: int) -> int:
        ledger.calls.append(("plain", x))
        return x + 1

    @app.step(name="after")
    async def after(x: int) -> int:
        ledger.calls.append(("after", x))
        return x * 2

    @app.workflow(name="kid")
    async def kid(ctx: Context, x: int) -> int:
        ledger.calls.append(("kid", x))
        return x + 100

    @app.workflow(name="flow")
    async def flow(ctx: Context, x: int) -> int:
        y = await plain(x)
        note = await ctx.recv(GO)
        z = await ctx.child(kid, y)
        return await after(z) + len(note or "")

    return app, flow, kid


async def test_list_pages_newest_first_by_filter_and_counts_are_exact(dsn: str) -> None:
    ledger = Ledger()
    clock = ManualClock()
    app, flow, _ = _app(dsn, ledger, clock)
    acme, globex = f"acme-{uuid.uuid4().hex[:6]}", f"globex-{uuid.uuid4().hex[:6]}"
    async with app:
        for n in range(12):
            clock.advance(1)
            await flow.start(n, id=f"wf-{n}", tenant=acme if n % 2 else globex)
        # The same id in two tenants names two workflows: both are listed.
        await flow.start(99, id="wf-1", tenant=globex)
        await app.run_until_idle()
        listed = await app.list_workflows(tenant=acme, kind="flow", limit=4)
        assert [w.workflow for w in listed.workflows] == ["wf-11", "wf-9", "wf-7", "wf-5"]
        assert {w.tenant for w in listed.workflows} == {acme}
        assert all(w.status is WorkflowStatus.BLOCKED for w in listed.workflows)
        rest = await app.list_workflows(tenant=acme, kind="flow", limit=4, after=listed.next_after)
        assert [w.workflow for w in rest.workflows] == ["wf-3", "wf-1"]
        assert rest.next_after is None
        since = (await (await app.get_handle("wf-5", tenant=acme)).status()).created
        assert since is not None
        window = await app.list_workflows(
            tenant=acme, created_after=since, created_before=since + timedelta(seconds=4)
        )
        assert [w.workflow for w in window.workflows] == ["wf-7", "wf-5"]
        children = await app.list_workflows(tenant=globex, kind="kid")
        assert children.workflows == []
        # Counts: 6 of acme blocked, 7 of globex (the 13th start reused no id).
        counts = await app.workflow_counts(tenant=globex)
        assert counts.by_status == {WorkflowStatus.BLOCKED: 7}
        assert counts.by_kind == {"flow": {WorkflowStatus.BLOCKED: 7}}
        everyone = await app.list_workflows(kind="flow", status="blocked", limit=1000)
        assert {(w.tenant, w.workflow) for w in everyone.workflows} >= {
            (acme, "wf-1"),
            (globex, "wf-1"),
        }


async def test_bad_input_is_refused_naming_the_argument_before_any_change(dsn: str) -> None:
    ledger = Ledger()
    app, flow, _ = _app(dsn, ledger)
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    async with app:
        handle = await flow.start(1, id="a", tenant=tenant)
        page = await app.list_workflows(tenant=tenant, limit=1)
        await flow.start(2, id="b", tenant=tenant)
        page = await app.list_workflows(tenant=tenant, limit=1)
        assert page.next_after is not None
        now = datetime.now(UTC)
        refusals: list[tuple[dict[str, Any], str]] = [
            ({"status": "sleepy"}, "status"),
            ({"kind": "no-such-kind"}, "kind"),
            ({"created_after": now, "created_before": now - timedelta(1)}, "created_after"),
            ({"created_after": datetime(2026, 1, 1)}, "created_after"),
            ({"limit": 0}, "limit"),
            ({"after": "not a cursor"}, "after"),
            ({"tenant": "another", "after": page.next_after}, "after"),
            ({"tenant": tenant, "kind": "flow", "after": page.next_after}, "after"),
        ]
        for arguments, named in refusals:
            for call in (app.list_workflows, app.cancel_workflows, app.resume_workflows):
                with pytest.raises(InvalidInputError, match=named):
                    await call(**arguments)
        with pytest.raises(InvalidInputError, match="no workflow matches"):
            await app.cancel_workflows(tenant=tenant, status="completed")
        with pytest.raises(InvalidInputError, match="from_step"):
            await handle.fork("never#1")
        # Nothing changed: both still pending, no fork started.
        counts = await app.workflow_counts(tenant=tenant)
        assert counts.by_status == {WorkflowStatus.PENDING: 2}
        assert (await handle.status()).forks == ()


async def _finish(app: App, handle: Any, note: str = "hey") -> None:
    await app.run_until_idle()
    await handle.send(GO, note)
    await app.run_until_idle()


@pytest.mark.parametrize("backing", ["memory", "sqlite"])
async def test_a_fork_replays_what_precedes_its_step_and_reruns_what_follows(
    backing: str, tmp_path: Path
) -> None:
    ledger = Ledger()
    app, flow, _ = _app(await _dsn(backing, tmp_path), ledger)
    async with app:
        original = await flow.start(1, id="orig")
        await _finish(app, original)
        assert await original.result() == 2 * (2 + 100) + 3
        assert [c for c, _ in ledger.calls] == ["plain", "kid", "after"]
        steps = [entry["key"] for entry in (await original.history())["history"]]
        assert steps.index("plain#1") < steps.index("durably:recv:go#1")

        ledger.calls.clear()
        fork = await original.fork("after#1")
        await app.run_until_idle()
        assert await fork.result() == 207
        assert ledger.calls == [("after", 102)]  # plain, recv and child replayed

        ledger.calls.clear()
        fork = await original.fork("durably:child:kid#1")
        await app.run_until_idle()
        assert await fork.result() == 207
        assert ledger.calls == [("kid", 2), ("after", 102)]  # a new child, then the rest

        ledger.calls.clear()
        fork = await original.fork("durably:recv:go#1")
        await _finish(app, fork, "x")  # the recv re-runs: it waits for a new message
        assert await fork.result() == 205
        assert [c for c, _ in ledger.calls] == ["kid", "after"]

        ledger.calls.clear()
        fork = await original.fork("plain#1")
        await _finish(app, fork)
        assert await fork.result() == 207
        assert [c for c, _ in ledger.calls] == ["plain", "kid", "after"]

        status = await original.status()
        assert len(status.forks) == 4
        assert (await fork.status()).forked_from == "orig"
        assert (await app.get_handle(status.forks[0])).id == status.forks[0]


@pytest.mark.parametrize("backing", ["memory", "sqlite"])
async def test_a_fork_from_a_transact_step_commits_the_effect_again_only_after_it(
    backing: str, tmp_path: Path
) -> None:
    dsn = await _dsn(backing, tmp_path)
    ledger_path = tmp_path / "ops.db"
    app = App(dsn, clock=ManualClock())
    effects: list[int] = []

    def effect(n: int) -> object:
        if backing == "memory":

            def apply(data: dict[str, object]) -> object:
                effects.append(n)
                return n

            return apply

        def run(cursor: sqlite3.Cursor) -> object:
            cursor.execute("INSERT INTO ledger (n) VALUES (?)", (n,))
            return n

        return run

    @app.workflow(name="pay")
    async def pay(ctx: Context, n: int) -> int:
        first: object = await ctx.transact("charge", effect(n))
        second: object = await ctx.transact("refund", effect(-n))
        return int(str(first)) + int(str(second)) + n

    async with app:
        if backing == "sqlite":
            await app.stores()
            with sqlite3.connect(ledger_path) as db:
                db.execute("CREATE TABLE IF NOT EXISTS ledger (n INTEGER)")
        original = await pay.start(5, id="p")
        await app.run_until_idle()
        assert await original.result() == 5
        fork = await original.fork("refund")
        await app.run_until_idle()
        assert await fork.result() == 5
        if backing == "sqlite":
            with sqlite3.connect(ledger_path) as db:
                effects = [row[0] for row in db.execute("SELECT n FROM ledger")]
        assert sorted(effects) == [-5, -5, 5]  # the charge once, the refund re-run


async def test_a_fork_of_a_workflow_with_a_pending_child_is_refused(tmp_path: Path) -> None:
    ledger = Ledger()
    app = App("memory://", clock=ManualClock())

    @app.workflow(name="slow")
    async def slow(ctx: Context) -> int:
        return len(str(await ctx.recv(GO)))

    @app.workflow(name="parent")
    async def parent(ctx: Context) -> int:
        ledger.calls.append(("parent", 0))
        kid = await ctx.child(slow)
        done = await ctx.recv(GO)
        return kid + len(done or "")

    async with app:
        handle = await parent.start(id="p")
        await app.run_until_idle()
        child = (await app.list_workflows(parent="p")).workflows
        assert [w.kind for w in child] == ["slow"]
        await (await app.get_handle(child[0].workflow)).send(GO, "xx")
        await app.run_until_idle()
        history = [entry["key"] for entry in (await handle.history())["history"]]
        with pytest.raises(InvalidInputError, match="had not ended"):
            await handle.fork(history[history.index("durably:child:slow#1") + 1])
        assert (await handle.status()).forks == ()


@pytest.mark.parametrize(
    ("backing", "count"), [("sqlite", 300), ("postgresql", 300), ("redis", 300)]
)
async def test_a_bulk_cancel_in_bounded_calls_while_workers_serve_loses_none(
    backing: str, count: int, tmp_path: Path
) -> None:
    dsn = await _dsn(backing, tmp_path)
    app = App(dsn)
    tenant = f"bulk-{uuid.uuid4().hex[:6]}"
    ran: list[int] = []

    @app.step
    async def work(n: int) -> int:
        ran.append(n)
        return n

    @app.workflow(name="bulk.wait")
    async def wait(ctx: Context, n: int) -> int:
        await work(n)
        if n % 3:
            await ctx.recv(GO)  # two in three wait for a message that never comes
        return n

    async with app:
        await asyncio.gather(*(wait.start(n, id=f"w{n}", tenant=tenant) for n in range(count)))
        serving = asyncio.create_task(app.serve(signals=False, poll=0.05, concurrency=8))
        try:
            await asyncio.sleep(0.5)  # workers are mid-way through them
            changed = 0
            calls = 0
            after = None
            while True:
                result = await app.cancel_workflows(tenant=tenant, limit=250, after=after)
                assert result.examined <= 250
                changed += len(result.changed)
                calls += 1
                after = result.next_after
                if after is None:
                    break
            assert calls >= count // 250
            ended = {WorkflowStatus.CANCELLED, WorkflowStatus.COMPLETED}
            deadline = asyncio.get_running_loop().time() + 90
            while True:
                counts = await app.workflow_counts(tenant=tenant)
                if set(counts.by_status) <= ended or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.2)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        assert set(counts.by_status) <= ended, counts.by_status
        assert counts.total == count  # none lost
        assert changed >= counts.by_status.get(WorkflowStatus.CANCELLED, 0) > 0
        # Repeating it changes nothing.
        again = await app.cancel_workflows(tenant=tenant, limit=1000)
        assert again.changed == []
