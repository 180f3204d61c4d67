"""`AppGates`: ``@app.workflow(concurrency=, concurrency_key=, throttle=)``, enforced by
the store.

How many workflows ran at once is read from a ledger the bodies write (a body marks its
first pass and its end), and from the statuses and gate counts the store reports; never
from the App's memory.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from durably.app import App, Context
from durably.clock import ManualClock
from durably.errors import InvalidInputError
from durably.stores.flow import Throttle
from durably.stores.gates import GateCounts, Gating
from durably.stores.runs import RunState
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import NOTE, AppFixtures, fresh_id


class Ledger:
    """What the bodies wrote: who began, who ended, and the most unfinished at once."""

    def __init__(self) -> None:
        self.began: list[str] = []
        self.ended: list[str] = []
        self.most = 0

    def begin(self, name: str) -> None:
        if name not in self.began:
            self.began.append(name)
        self.most = max(self.most, len(set(self.began) - set(self.ended)))

    def end(self, name: str) -> None:
        self.ended.append(name)


async def _gates(app: App) -> Gating:
    checkpointer = (await app.stores()).checkpointer
    assert isinstance(checkpointer, Gating)  # every shipped checkpointer gates starts
    return checkpointer


class AppGates(AppFixtures):
    async def test_a_kind_with_concurrency_2_never_has_more_than_2_admitted_at_once(
        self, app: App
    ) -> None:
        gates = await _gates(app)
        ledger = Ledger()
        kind = f"gated-{fresh_id()}"

        @app.workflow(name=kind, concurrency=2)
        async def waits(ctx: Context, name: str) -> str:
            ledger.begin(name)
            try:
                note = str(await ctx.recv(NOTE))
            except asyncio.CancelledError:
                ledger.end(name)
                raise
            ledger.end(name)
            return note

        handles = [await waits.start(f"w{n}") for n in range(6)]
        await app.run_until_idle(advance=False)
        statuses = [(await handle.status()).status for handle in handles]
        assert statuses.count(WorkflowStatus.BLOCKED) == 2
        assert statuses.count(WorkflowStatus.QUEUED) == 4
        assert ledger.began == ["w0", "w1"]
        assert await gates.gate_counts(kind) == GateCounts(admitted=2, queued=4)
        assert (await handles[2].run_record()).state is RunState.PENDING
        listed = await app.list_workflows(status=WorkflowStatus.QUEUED, kind=kind)
        assert {info.workflow for info in listed.workflows} == {h.id for h in handles[2:]}
        counted = (await app.workflow_counts()).by_kind[kind]
        assert (counted.get(WorkflowStatus.QUEUED), counted.get(WorkflowStatus.BLOCKED)) == (4, 2)
        # Finishing one admits exactly the next, oldest first.
        await handles[0].send(NOTE, "done")
        await app.run_until_idle(advance=False)
        assert await handles[0].result(timeout=5) == "done"
        assert ledger.began == ["w0", "w1", "w2"]
        assert await gates.gate_counts(kind) == GateCounts(admitted=2, queued=3)
        # Cancelling an admitted one admits the next; a queued one ends at once, freeing
        # nothing (it held nothing).
        assert await handles[1].cancel()
        assert await handles[5].cancel()
        assert (await handles[5].status()).status is WorkflowStatus.CANCELLED
        assert await gates.gate_counts(kind) == GateCounts(admitted=2, queued=2)
        await app.run_until_idle(advance=False)
        assert (await handles[1].status()).status is WorkflowStatus.CANCELLED
        assert ledger.began == ["w0", "w1", "w2", "w3"]
        assert await gates.gate_counts(kind) == GateCounts(admitted=2, queued=1)
        for handle in handles[2:5]:  # w4 is admitted when w2 ends
            await handle.send(NOTE, "done")
            await app.run_until_idle(advance=False)
        assert ledger.began == ["w0", "w1", "w2", "w3", "w4"]  # w5 never ran
        assert ledger.most == 2
        assert await gates.gate_counts(kind) == GateCounts()

    async def test_a_limit_per_key_holds_one_key_and_lets_the_others_run(self, app: App) -> None:
        gates = await _gates(app)
        ledger = Ledger()
        kind = f"keyed-{fresh_id()}"

        @app.workflow(name=kind, concurrency=1, concurrency_key=lambda account, n: account)
        async def charge(ctx: Context, account: str, n: int) -> str:
            ledger.begin(f"{account}{n}")
            return str(await ctx.recv(NOTE))

        first = await charge.start("a", 1)
        second = await charge.start("a", 2)
        other = await charge.start("b", 1)
        await app.run_until_idle(advance=False)
        assert sorted(ledger.began) == ["a1", "b1"]
        assert (await second.status()).status is WorkflowStatus.QUEUED
        assert await gates.gate_counts(f"{kind}:a") == GateCounts(admitted=1, queued=1)
        # A message to a queued workflow waits for it; it does not run it.
        await second.send(NOTE, "early")
        await app.run_until_idle(advance=False)
        assert (await second.status()).status is WorkflowStatus.QUEUED
        assert sorted(ledger.began) == ["a1", "b1"]
        await first.send(NOTE, "done")
        await app.run_until_idle(advance=False)
        assert sorted(ledger.began) == ["a1", "a2", "b1"]
        assert await second.result(timeout=5) == "early"
        assert (await other.status()).status is WorkflowStatus.BLOCKED

    async def test_a_deleted_workflow_frees_its_slot_for_the_next(self, app: App) -> None:
        gates = await _gates(app)
        kind = f"deleted-{fresh_id()}"

        @app.workflow(name=kind, concurrency=1)
        async def waits(ctx: Context) -> str:
            return str(await ctx.recv(NOTE))

        held = await waits.start()
        queued = await waits.start()
        await app.run_until_idle(advance=False)
        assert (await queued.status()).status is WorkflowStatus.QUEUED
        assert await (await app.stores()).durable(kind).delete(held._key) > 0
        # Admitted by the delete, not run yet: its catalog entry and counts moved with the
        # status the gate wrote.
        assert (await queued.status()).status is WorkflowStatus.PENDING
        counted = (await app.workflow_counts()).by_kind[kind]
        assert counted.get(WorkflowStatus.QUEUED, 0) == 0
        assert counted.get(WorkflowStatus.PENDING) == 1
        listed = await app.list_workflows(status=WorkflowStatus.PENDING, kind=kind)
        assert [info.workflow for info in listed.workflows] == [queued.id]
        await app.run_until_idle(advance=False)
        assert (await queued.status()).status is WorkflowStatus.BLOCKED
        assert await gates.gate_counts(kind) == GateCounts(admitted=1)

    async def test_a_gate_repair_changes_nothing_where_no_step_was_lost(self, app: App) -> None:
        gates = await _gates(app)
        ran: list[str] = []
        kind = f"repaired-{fresh_id()}"

        @app.workflow(name=kind, concurrency=1)
        async def waits(ctx: Context, name: str) -> str:
            await ctx.step("ran", lambda: ran.append(name))
            return str(await ctx.recv(NOTE))

        handles = [await waits.start(f"w{n}") for n in range(3)]
        await app.run_until_idle(advance=False)
        assert await gates.repair_gates(limit=10_000) == 0
        assert await (await app.stores()).durable(kind).delete(handles[0]._key) > 0
        # w1 is admitted and ready, PENDING until its pass: nothing for a repair to do.
        assert (await handles[1].status()).status is WorkflowStatus.PENDING
        assert await gates.repair_gates(limit=10_000) == 0
        await app.run_until_idle(advance=False)
        await handles[1].send(NOTE, "done")
        await app.run_until_idle(advance=False)
        assert ran == ["w0", "w1", "w2"]
        assert await gates.gate_counts(kind) == GateCounts(admitted=1)

    async def test_queued_tenants_take_turns_through_a_gate(self, app: App) -> None:
        await _gates(app)
        ledger = Ledger()

        @app.workflow(name=f"turns-{fresh_id()}", concurrency=1)
        async def job(ctx: Context, name: str) -> None:
            ledger.begin(name)

        noisy, quiet = f"noisy-{fresh_id()}", f"quiet-{fresh_id()}"
        for n in range(4):
            await job.start(f"noisy{n}", tenant=noisy)
        await job.start("quiet0", tenant=quiet)
        await app.run_until_idle(advance=False)
        # The quiet tenant's later start is admitted second, not after the burst.
        assert ledger.began[:3] == ["noisy0", "quiet0", "noisy1"]
        assert len(ledger.began) == 5

    async def test_a_throttle_admits_starts_at_its_rate(self, app: App) -> None:
        await _gates(app)
        clock = app.clock
        assert isinstance(clock, ManualClock)
        began: list[float] = []

        @app.workflow(name=f"paced-{fresh_id()}", throttle=Throttle(2, per=timedelta(minutes=1)))
        async def paced(ctx: Context, n: int) -> int:
            began.append(clock.now())
            return n

        start = clock.now()
        handles = [await paced.start(n) for n in range(4)]
        await app.run_until_idle(advance=False)
        assert began == [start]
        for _ in range(3):
            clock.advance(30)
            await app.run_until_idle(advance=False)
        assert began == [start, start + 30, start + 60, start + 90]
        assert [await handle.result(timeout=5) for handle in handles] == [0, 1, 2, 3]

    async def test_bad_flow_options_are_refused_naming_the_argument(self, app: App) -> None:
        for bad in (0, -1, 1.5, True, "2"):
            with pytest.raises(InvalidInputError, match="concurrency"):
                app.workflow(name=f"bad-{fresh_id()}", concurrency=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="concurrency_key needs concurrency"):
            app.workflow(name=f"bad-{fresh_id()}", concurrency_key=lambda: "k")
        with pytest.raises(InvalidInputError, match="concurrency_key must be a callable"):
            app.workflow(name=f"bad-{fresh_id()}", concurrency=1, concurrency_key="k")  # type: ignore[call-overload]
        with pytest.raises(InvalidInputError, match="throttle"):
            app.workflow(name=f"bad-{fresh_id()}", throttle=5)  # type: ignore[call-overload]
        with pytest.raises(InvalidInputError, match="throttle does not apply with debounce"):
            app.workflow(name=f"bad-{fresh_id()}", throttle="1/s", debounce=5)

        def key_of(key: str | int) -> object:
            if key == "raise":
                raise RuntimeError("no key")
            return key

        @app.workflow(name=f"keys-{fresh_id()}", concurrency=1, concurrency_key=key_of)  # type: ignore[arg-type]
        async def keyed(ctx: Context, key: str | int) -> None:
            return None

        for key, message in (
            ("raise", "concurrency_key failed"),
            (7, "concurrency_key must return a string"),
            ("", "concurrency_key must not be empty"),
            ("k" * 600, "concurrency_key must be at most"),
        ):
            with pytest.raises(InvalidInputError, match=message):
                await keyed.start(key)
        assert (await app.list_workflows(kind=keyed.kind)).workflows == []
