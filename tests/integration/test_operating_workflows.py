"""Operating workflows through the App: listing by filter with cursors bound to the filter,
counts, bulk cancel while workers serve, fork from each kind of step, and the bad input
the operations refuse before changing anything."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from durably import App, Context, ManualClock, Topic, WorkflowStatus
from durably.app._tenancy import workflow_key
from durably.errors import InvalidInputError
from durably.stores.catalog import MAX_CATALOG_BATCH, CatalogEntry, Cataloguing
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


async def test_pages_see_each_workflow_once_when_starts_are_microseconds_apart(dsn: str) -> None:
    """Creation times a few microseconds apart (a burst of starts) order the lines and the
    marks alike: no page repeats the last row of the one before, none skips the next."""
    clock = ManualClock(1_780_000_000.0)
    app = App(dsn, clock=clock)

    @app.workflow(name="tick")
    async def tick(ctx: Context, n: int) -> int:
        return n

    tenant = f"t-{uuid.uuid4().hex[:6]}"
    async with app:
        for n in range(24):
            clock.advance(0.000003)
            await tick.start(n, id=f"tick-{n:02d}", tenant=tenant)
        for limit in (1, 2, 5):
            seen: list[str] = []
            after = None
            while True:
                page = await app.list_workflows(tenant=tenant, limit=limit, after=after)
                seen += [w.workflow for w in page.workflows]
                assert len(seen) <= 24, (limit, seen)  # a repeated row would loop for ever
                if page.next_after is None:
                    break
                after = page.next_after
            assert seen == [f"tick-{n:02d}" for n in reversed(range(24))], limit


WORKFLOWS = 100_000
TENANTS = 1_000
BULK = 10_000
KINDS = ("triage", "notify", "bill")
BASE_US = 1_780_000_000_000_000


def _tenant(n: int) -> str:
    return f"t{n % TENANTS:03d}"


def _entry(n: int) -> CatalogEntry:
    # Every 7th shares its creation time with its neighbour (ties broken by key); half of
    # those after the first thousand are children of their tenant's first workflow.
    created = BASE_US + (n - 1 if n % 7 == 1 else n) * 1000
    parent = workflow_key(_tenant(n), f"wf-{n % TENANTS}") if n >= TENANTS and n % 2 else None
    return CatalogEntry(_tenant(n), KINDS[n % 3], created, parent)


async def _catalogue(app: App, count: int) -> dict[int, WorkflowStatus]:
    """Catalogue ``count`` workflows through the store's batch write, one batch after
    another, and report a status for 600 of them as passes do; those statuses.

    One batch at a time: every batch counts workflows of every tenant, so batches side by
    side queue on the count rows (PostgreSQL: alternating runs of 100,000 took 9.4 s and
    8.9 s one at a time, 13.6 s and 11.8 s four at a time).
    """
    checkpointer = (await app.stores()).checkpointer
    assert isinstance(checkpointer, Cataloguing)
    for first in range(0, count, MAX_CATALOG_BATCH):
        last = min(first + MAX_CATALOG_BATCH, count)
        entries = [(workflow_key(_tenant(n), f"wf-{n}"), _entry(n)) for n in range(first, last)]
        await checkpointer.catalog_many(entries)
    gate = asyncio.Semaphore(4)
    rng = random.Random(11)
    chosen = {
        n: rng.choice([WorkflowStatus.RUNNING, WorkflowStatus.FAILED, WorkflowStatus.COMPLETED])
        for n in rng.sample(range(count), 600)
    }

    async def report(n: int, status: WorkflowStatus) -> None:
        async with gate:
            holder = await checkpointer.claim(workflow_key(_tenant(n), f"wf-{n}"), 30, 30)
            assert holder is not None
            await checkpointer.set_status(holder, status)
            await checkpointer.release(holder)

    await asyncio.gather(*(report(n, status) for n, status in chosen.items()))
    return chosen


async def test_listing_100000_workflows_of_1000_tenants_by_each_filter_sees_each_once(
    dsn: str,
) -> None:
    app = App(dsn)
    for kind in KINDS:

        @app.workflow(name=kind)
        async def body(ctx: Context) -> None:
            return None

    async with app:
        count = WORKFLOWS
        statuses = await _catalogue(app, count)

        def status_of(n: int) -> WorkflowStatus:
            return statuses.get(n, WorkflowStatus.PENDING)

        first, end = count // 5, count * 3 // 10  # a window of a tenth, ties on its edges
        since = datetime.fromtimestamp((BASE_US + first * 1000) / 1e6, UTC)
        until = datetime.fromtimestamp((BASE_US + end * 1000) / 1e6, UTC)

        def within(n: int, end: int = end) -> bool:
            return BASE_US + first * 1000 <= _entry(n).created_us < BASE_US + end * 1000

        parent = workflow_key(_tenant(43), "wf-43")
        cases: list[tuple[dict[str, Any], Any]] = [
            ({}, lambda n: True),
            ({"kind": "bill"}, lambda n: n % 3 == 2),
            ({"status": "failed"}, lambda n: status_of(n) is WorkflowStatus.FAILED),
            ({"tenant": _tenant(42)}, lambda n: n % TENANTS == 42),
            ({"created_after": since, "created_before": until}, within),
            ({"tenant": _tenant(43), "parent": "wf-43"}, lambda n: _entry(n).parent == parent),
            (
                {"kind": "notify", "status": "running"},
                lambda n: n % 3 == 1 and status_of(n) is WorkflowStatus.RUNNING,
            ),
            (
                {"tenant": _tenant(7), "kind": "triage"},
                lambda n: n % TENANTS == 7 and n % 3 == 0,
            ),
            (
                {"tenant": _tenant(9), "status": "pending"},
                lambda n: n % TENANTS == 9 and status_of(n) is WorkflowStatus.PENDING,
            ),
            (
                {"kind": "triage", "status": "completed", "created_after": since},
                lambda n: (
                    n % 3 == 0 and status_of(n) is WorkflowStatus.COMPLETED and within(n, end=count)
                ),
            ),
        ]
        for arguments, wanted in cases:
            expected = {(_tenant(n), f"wf-{n}") for n in range(count) if wanted(n)}
            assert expected, arguments
            seen: list[tuple[str, str]] = []
            newest: list[datetime] = []
            after = None
            while True:
                page = await app.list_workflows(**arguments, limit=1000, after=after)
                seen += [(str(w.tenant), w.workflow) for w in page.workflows]
                newest += [w.created for w in page.workflows if w.created is not None]
                if page.next_after is None:
                    break
                after = page.next_after
            assert len(seen) == len(set(seen)), arguments  # each once
            assert set(seen) == expected, arguments
            assert newest == sorted(newest, reverse=True), arguments


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


async def test_a_bulk_cancel_side_by_side_cascades_frees_gates_and_keeps_to_its_tenant(
    dsn: str,
) -> None:
    app = App(dsn, clock=ManualClock())
    acme, globex = f"acme-{uuid.uuid4().hex[:6]}", f"globex-{uuid.uuid4().hex[:6]}"
    ran: list[int] = []

    @app.step(name="note")
    async def note(n: int) -> None:
        ran.append(n)

    @app.workflow(name="leaf")
    async def leaf(ctx: Context, n: int) -> int:
        await ctx.recv(GO)
        return n

    @app.workflow(name="gated", concurrency=2)
    async def gated(ctx: Context, n: int) -> int:
        await note(n)
        await ctx.child(leaf, n)
        await ctx.recv(GO)
        return n

    async with app:
        for tenant in (acme, globex):  # the same ids in a second tenant
            for n in range(6):
                await gated.start(n, id=f"g{n}", tenant=tenant)
        await app.run_until_idle()
        # The kind's gate (across tenants) holds two of acme's; the rest wait in line.
        assert (await app.workflow_counts(tenant=acme)).by_kind == {
            "gated": {WorkflowStatus.BLOCKED: 2, WorkflowStatus.QUEUED: 4},
            "leaf": {WorkflowStatus.BLOCKED: 2},
        }
        assert (await app.workflow_counts(tenant=globex)).by_status == {WorkflowStatus.QUEUED: 6}
        changed: list[str] = []
        after = None
        while True:  # pages of two, each page's pair cancelled side by side
            result = await app.cancel_workflows(tenant=acme, kind="gated", limit=2, after=after)
            changed += [w.workflow for w in result.changed]
            after = result.next_after
            if after is None:
                break
        await app.run_until_idle()
        assert sorted(changed) == [f"g{n}" for n in range(6)]  # each once
        # Both running ones took their child down with them; none of the queued ran.
        assert (await app.workflow_counts(tenant=acme)).by_kind == {
            "gated": {WorkflowStatus.CANCELLED: 6},
            "leaf": {WorkflowStatus.CANCELLED: 2},
        }
        # The gate is free again: it let two of the other tenant's in, the same ids
        # untouched by acme's cancel.
        assert (await app.workflow_counts(tenant=globex)).by_kind == {
            "gated": {WorkflowStatus.BLOCKED: 2, WorkflowStatus.QUEUED: 4},
            "leaf": {WorkflowStatus.BLOCKED: 2},
        }
        assert sorted(ran) == [0, 0, 1, 1]  # acme's first two, then globex's


# Filled by batches of starts (start_many, a thousand a call, as a user filling a system
# would), cancelled a page of 1,000 a call, each page in a few store calls, while
# workers serve them.
@pytest.mark.parametrize("backing", ["memory", "sqlite", "postgresql", "redis"])
async def test_a_bulk_cancel_in_bounded_calls_while_workers_serve_loses_none(
    backing: str, tmp_path: Path
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

    count = BULK
    async with app:
        for first in range(0, count, 1000):  # a thousand starts a call, as a user filling
            batch = range(first, min(first + 1000, count))
            handles = await wait.start_many(
                [(n,) for n in batch], ids=[f"w{n}" for n in batch], tenant=tenant
            )
            assert all(handle.created for handle in handles)
        limit = 1000
        serving = asyncio.create_task(app.serve(signals=False, poll=0.05, concurrency=8))
        try:
            await asyncio.sleep(0.5)  # workers are mid-way through them
            changed = examined = calls = 0
            after = None
            while True:
                result = await app.cancel_workflows(tenant=tenant, limit=limit, after=after)
                assert result.examined <= limit
                changed += len(result.changed)
                examined += result.examined
                calls += 1
                after = result.next_after
                if after is None:
                    break
            assert calls >= count // limit
            assert examined == count  # each page's workflows once, none skipped
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
