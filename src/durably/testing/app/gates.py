"""`AppGates`: ``@app.workflow(concurrency=, concurrency_key=, throttle=)``, enforced by
the store.

How many workflows ran at once is read from a ledger the bodies write (a body marks its
first pass and its end), and from the statuses and gate counts the store reports; never
from the App's memory.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest

from durably.app import App, Context, Workflow
from durably.clock import ManualClock
from durably.errors import InvalidInputError
from durably.stores.flow import Throttle
from durably.stores.gates import GateCounts, Gating, gate_name
from durably.stores.runs import RunState
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import NOTE, AppFactory, AppFixtures, fresh_id


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


async def _opened(app_factory: AppFactory) -> tuple[ManualClock, App, Gating]:
    """An App of ``app_factory`` on a clock of its own, and its store's gates."""
    clock = ManualClock()
    app = await app_factory(clock)
    return clock, app, await _gates(app)


def _waiter(app: App, kind: str, concurrency: int, ledger: Ledger) -> Workflow[[str], str]:
    """Register gated ``kind`` on ``app``: each body notes its begin (by id) in ``ledger``,
    waits for a note, notes its end and returns the note."""

    @app.workflow(name=kind, concurrency=concurrency)
    async def waits(ctx: Context, name: str) -> str:
        ledger.begin(ctx.id)
        note = str(await ctx.recv(NOTE))
        ledger.end(ctx.id)
        return note

    return waits


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
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=2, queued=4)
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
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=2, queued=3)
        # Cancelling an admitted one admits the next; a queued one ends at once, freeing
        # nothing (it held nothing).
        assert await handles[1].cancel()
        assert await handles[5].cancel()
        assert (await handles[5].status()).status is WorkflowStatus.CANCELLED
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=2, queued=2)
        await app.run_until_idle(advance=False)
        assert (await handles[1].status()).status is WorkflowStatus.CANCELLED
        assert ledger.began == ["w0", "w1", "w2", "w3"]
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=2, queued=1)
        for handle in handles[2:5]:  # w4 is admitted when w2 ends
            await handle.send(NOTE, "done")
            await app.run_until_idle(advance=False)
        assert ledger.began == ["w0", "w1", "w2", "w3", "w4"]  # w5 never ran
        assert ledger.most == 2
        assert await gates.gate_counts(gate_name(kind)) == GateCounts()

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
        assert await gates.gate_counts(gate_name(kind, "a")) == GateCounts(admitted=1, queued=1)
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
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=1)

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
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=1)

    async def test_a_raised_limit_admits_the_line_at_the_next_start_and_never_past_it(
        self, app_factory: AppFactory
    ) -> None:
        clock, app, gates = await _opened(app_factory)
        ledger, kind = Ledger(), f"raised-{fresh_id()}"
        old = _waiter(app, kind, 2, ledger)
        handles = [await old.start(f"w{n}") for n in range(6)]
        await app.run_until_idle(advance=False)
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=2, queued=4)
        # The deploy raising 2 to 5: two Apps of it start at once (one App playing it,
        # where two Apps cannot share the store).
        if self.shares_stores:
            deployed = [await app_factory(clock), await app_factory(clock)]
            new = [_waiter(other, kind, 5, ledger) for other in deployed]
        else:
            deployed = [app]
            old.gates = dataclasses.replace(old.gates, concurrency=5)
            new = [old, old]
        await asyncio.gather(*(new[n % 2].start(f"n{n}") for n in range(4)))
        # The line's three oldest are admitted; the new starts queue behind its last.
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=5, queued=5)
        await asyncio.gather(*(each.run_until_idle(advance=False) for each in deployed))
        assert sorted(ledger.began) == sorted(handle.id for handle in handles[:5])
        assert ledger.most == 5

    async def test_a_fork_of_a_gated_workflow_waits_in_its_gate_line(
        self, app_factory: AppFactory
    ) -> None:
        clock, app, gates = await _opened(app_factory)
        ledger, kind = Ledger(), f"forked-{fresh_id()}"
        first = await _waiter(app, kind, 1, ledger).start("w")
        await app.run_until_idle(advance=False)
        fork = await first.fork()
        assert (await fork.status()).status is WorkflowStatus.QUEUED
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=1, queued=1)
        if self.shares_stores:  # a fork from an App that does not register the kind
            bare = await app_factory(clock)
            again = await (await bare.get_handle(first.id)).fork()
            assert (await again.status()).status is WorkflowStatus.QUEUED
            assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=1, queued=2)
        await app.run_until_idle(advance=False)
        assert ledger.began == [first.id]
        await first.send(NOTE, "done")
        await app.run_until_idle(advance=False)
        assert ledger.began == [first.id, fork.id]
        assert ledger.most == 1

    async def test_a_kind_holding_a_colon_never_shares_a_gate_with_a_keyed_kind(
        self, app: App
    ) -> None:
        gates = await _gates(app)
        base = f"colon-{fresh_id()}"
        ledger = Ledger()

        @app.workflow(name=f"{base}:x", concurrency=1)
        async def plain(ctx: Context) -> str:
            ledger.begin(ctx.id)
            return str(await ctx.recv(NOTE))

        @app.workflow(name=base, concurrency=1, concurrency_key=lambda key: key)
        async def keyed(ctx: Context, key: str) -> str:
            ledger.begin(ctx.id)
            return str(await ctx.recv(NOTE))

        first = await plain.start()
        second = await keyed.start("x")
        await app.run_until_idle(advance=False)
        assert (await second.status()).status is WorkflowStatus.BLOCKED
        assert sorted(ledger.began) == sorted([first.id, second.id])
        assert gate_name(f"{base}:x") != gate_name(base, "x")
        assert await gates.gate_counts(gate_name(base, "x")) == GateCounts(admitted=1)

    async def test_a_queued_workflow_whose_claim_a_worker_holds_ends_cancelled(
        self, app: App
    ) -> None:
        gates = await _gates(app)
        kind = f"claimed-{fresh_id()}"
        ran: list[str] = []

        @app.workflow(name=kind, concurrency=1)
        async def waits(ctx: Context, name: str) -> str:
            ran.append(name)
            return str(await ctx.recv(NOTE))

        held = await waits.start("held")
        queued = await waits.start("queued")
        await app.run_until_idle(advance=False)
        checkpointer = (await app.stores()).checkpointer
        # A worker that took a delivery of the queued workflow (a message woke it) holds
        # its claim while it reads the status.
        holder = await checkpointer.claim(queued._key, 30.0, 30.0)
        assert holder is not None
        cancelling = asyncio.create_task(queued.cancel())
        await asyncio.sleep(0.2)
        await checkpointer.release(holder)
        assert await asyncio.wait_for(cancelling, 10)
        assert (await queued.status()).status is WorkflowStatus.CANCELLED
        # It held no slot, so it freed none: the held one still holds the only one.
        assert await gates.gate_counts(gate_name(kind)) == GateCounts(admitted=1)
        await app.run_until_idle(advance=False)
        assert ran == ["held"]
        assert (await held.status()).status is WorkflowStatus.BLOCKED

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
