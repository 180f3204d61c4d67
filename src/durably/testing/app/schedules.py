"""`AppSchedules`: cron workflows start once per tick however many Apps tick them, and
debounced starts fold into one pending workflow that runs once, with the last arguments.

What ran is read from a ledger the bodies write, never from the App.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durably.app import App, Context, WorkflowHandle
from durably.app.storage import delete_workflow
from durably.clock import ManualClock
from durably.errors import QueueUnavailableError
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFactory, AppFixtures, fresh_id

WINDOW = 60.0
TICK = datetime(2027, 3, 1, 9, 0, tzinfo=UTC).timestamp()


class AppSchedules(AppFixtures):
    async def test_a_cron_workflow_ticked_by_three_apps_starts_once_a_tick(
        self, app_factory: AppFactory
    ) -> None:
        clock = ManualClock(TICK + 30)
        apps = [await app_factory(clock)]
        if self.shares_stores:
            apps += [await app_factory(clock), await app_factory(clock)]
        kind = f"minutely-{fresh_id()}"
        ledger: list[tuple[str, datetime]] = []
        for app in apps:

            @app.workflow(name=kind, cron="* * * * *")
            async def minutely(ctx: Context, tick: datetime) -> None:
                ledger.append((ctx.id, tick))

        for _ in range(6):  # the first round takes the mark; five ticks follow
            await asyncio.gather(*(app.run_until_idle(advance=False) for app in apps))
            clock.advance(60)
        ticks = [datetime.fromtimestamp(TICK + 60 * n, UTC) for n in range(1, 6)]
        assert sorted(ledger) == [(f"{kind}@{tick.isoformat()}", tick) for tick in ticks]

    async def test_fifty_debounced_starts_run_the_body_once_with_the_last_arguments(
        self, app: App
    ) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)
        ran: list[tuple[str, int, float]] = []

        @app.workflow(name=f"debounced-{fresh_id()}", debounce=timedelta(seconds=WINDOW))
        async def settle(ctx: Context, n: int) -> int:
            ran.append((ctx.id, n, clock.now()))
            return n

        began = clock.now()
        handles = []
        for n in range(50):
            handles.append(await settle.start(n))
            clock.advance(1)  # each within the window of the one before
        assert len({handle.id for handle in handles}) == 1
        assert [handle.created for handle in handles] == [True] + [False] * 49
        await app.run_until_idle()
        assert ran == [(handles[0].id, 49, began + 49 + WINDOW)]
        assert await handles[-1].result(timeout=5) == 49

    async def test_a_debounced_start_begins_at_its_window_and_a_later_start_makes_another(
        self, app: App
    ) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)
        ran: list[tuple[str, str]] = []

        @app.workflow(
            name=f"per-key-{fresh_id()}", debounce=WINDOW, debounce_key=lambda key, n: key
        )
        async def settle(ctx: Context, key: str, n: int) -> None:
            ran.append((key, str(n)))

        first = await settle.start("a", 1)
        other_key = await settle.start("b", 1)
        assert other_key.id != first.id
        clock.advance(WINDOW - 1)
        again = await settle.start("a", 2)  # pushes "a" to a full window from now
        assert again.id == first.id
        await app.run_until_idle(advance=False)
        clock.advance(1)  # "b" is due, "a" is not
        await app.run_until_idle(advance=False)
        assert ran == [("b", "1")]
        clock.advance(WINDOW - 1)
        await app.run_until_idle(advance=False)
        assert ran == [("b", "1"), ("a", "2")]
        later = await settle.start("a", 3)  # "a" has run: a new pending workflow
        assert later.id != first.id
        assert later.created
        await app.run_until_idle()
        assert ran == [("b", "1"), ("a", "2"), ("a", "3")]

    async def test_a_debounced_workflow_cancelled_before_it_began_frees_its_key(
        self, app: App
    ) -> None:
        ran: list[int] = []

        @app.workflow(name=f"cancelled-{fresh_id()}", debounce=WINDOW)
        async def settle(ctx: Context, n: int) -> None:
            ran.append(n)

        first = await settle.start(1)
        slot = await _slot(app, first)
        assert await _debounced(app, slot) == first.id
        assert await first.cancel()
        assert (await first.status()).status is WorkflowStatus.CANCELLED
        assert await _debounced(app, slot) is None  # its end deleted the key's slot
        second = await settle.start(2)  # not the ended one's handle: a workflow of its own
        assert (second.id != first.id, second.created) == (True, True)
        assert (await settle.start(3)).id == second.id  # and the key debounces again
        await app.run_until_idle()
        assert ran == [3]

    async def test_a_debounced_key_keeps_no_slot_once_its_workflow_began(self, app: App) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)
        ran: list[tuple[str, int]] = []

        @app.workflow(name=f"swept-{fresh_id()}", debounce=WINDOW, debounce_key=lambda n: "k")
        async def settle(ctx: Context, n: int) -> None:
            ran.append((ctx.id, n))

        first = await settle.start(1)
        assert (await settle.start(2)).id == first.id
        slot = await _slot(app, first)
        assert await _debounced(app, slot) == first.id
        clock.advance(WINDOW)
        await app.run_until_idle(advance=False)
        assert ran == [(first.id, 2)]
        assert await _debounced(app, slot) is None
        later = await settle.start(3)  # the key debounces afresh
        assert (later.id != first.id, later.created) == (True, True)
        assert await _debounced(app, slot) == later.id
        assert (await settle.start(4)).id == later.id
        await app.run_until_idle()
        assert ran == [(first.id, 2), (later.id, 4)]
        assert await _debounced(app, slot) is None
        # Cancelled while it sleeps in its window: its end deletes the slot too.
        sleeping = await settle.start(5)
        await app.run_until_idle(advance=False)
        assert (await sleeping.status()).status is WorkflowStatus.SLEEPING
        assert await sleeping.cancel()
        await app.run_until_idle(advance=False)
        assert (await sleeping.status()).status is WorkflowStatus.CANCELLED
        assert await _debounced(app, slot) is None
        assert ran == [(first.id, 2), (later.id, 4)]

    async def test_a_debounced_workflow_deleted_in_its_window_leaves_no_slot(
        self, app: App
    ) -> None:
        ran: list[tuple[str, int]] = []

        @app.workflow(name=f"deleted-{fresh_id()}", debounce=WINDOW)
        async def settle(ctx: Context, n: int) -> None:
            ran.append((ctx.id, n))

        before = await self.stored_slots(app)
        first = await settle.start(1)
        slot = await _slot(app, first)
        assert await self.stored_slots(app) == (None if before is None else before + 1)
        await app.run_until_idle(advance=False)  # sleeping in its window
        stores = await app.stores()
        assert await delete_workflow(stores, first._key, settle.kind) > 0
        assert await _debounced(app, slot) is None
        assert await self.stored_slots(app) == before
        second = await settle.start(2)  # a workflow of its own, pending at once
        assert (second.id != first.id, second.created) == (True, True)
        assert await _debounced(app, slot) == second.id
        await app.run_until_idle()
        assert ran == [(second.id, 2)]
        assert await self.stored_slots(app) == before

    async def test_a_debounced_workflow_failed_in_its_window_leaves_no_slot(
        self, app: App, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        ran: list[tuple[str, int]] = []

        @app.workflow(name=f"failed-{fresh_id()}", debounce=WINDOW)
        async def settle(ctx: Context, n: int) -> None:
            ran.append((ctx.id, n))

        before = await self.stored_slots(app)
        first = await settle.start(1)
        slot = await _slot(app, first)
        queue = (await app.stores()).queue

        async def refused(slot: str, workflow: str, now: float) -> object:
            raise RuntimeError("the slot could not be read")

        monkeypatch.setattr(queue, "begin_debounced", refused)
        await app.run_until_idle()
        assert (await first.status()).status is WorkflowStatus.FAILED
        assert await _debounced(app, slot) is None  # its end deleted the key's slot
        assert await self.stored_slots(app) == before
        monkeypatch.undo()
        second = await settle.start(2)
        assert (second.id != first.id, second.created) == (True, True)
        await app.run_until_idle()
        assert ran == [(second.id, 2)]

    @pytest.mark.parametrize("where", ["sleeping in its window", "pending"])
    async def test_a_cancelled_end_whose_slot_release_failed_releases_it_on_the_next_pass(
        self, app: App, monkeypatch: pytest.MonkeyPatch, where: str
    ) -> None:
        ran: list[int] = []

        @app.workflow(name=f"lost-release-{fresh_id()}", debounce=WINDOW)
        async def settle(ctx: Context, n: int) -> None:
            ran.append(n)

        before = await self.stored_slots(app)
        first = await settle.start(1)
        slot = await _slot(app, first)
        if where != "pending":
            await app.run_until_idle(advance=False)
            assert (await first.status()).status is WorkflowStatus.SLEEPING
        queue = (await app.stores()).queue
        release = queue.release_debounced  # type: ignore[attr-defined]
        failures: list[str] = []

        async def unavailable_once(slot: str, workflow: str) -> bool:
            if not failures:
                failures.append(workflow)
                raise QueueUnavailableError("*", "release_debounced", "connection reset")
            released: bool = await release(slot, workflow)
            return released

        monkeypatch.setattr(queue, "release_debounced", unavailable_once)
        try:
            await first.cancel()
        except QueueUnavailableError:
            assert where == "pending"  # said to the caller: the store was away
        await app.run_until_idle()  # the next pass sees the recorded end and lets go
        assert failures == [first.id]
        assert (await first.status()).status is WorkflowStatus.CANCELLED
        assert await _debounced(app, slot) is None
        assert await self.stored_slots(app) == before
        second = await settle.start(2)
        assert (second.id != first.id, second.created) == (True, True)
        await app.run_until_idle()
        assert ran == [2]

    async def test_debounced_starts_racing_from_two_apps_run_the_body_once(
        self, app_factory: AppFactory
    ) -> None:
        if not self.shares_stores:
            pytest.skip("two Apps over one store")
        clock = ManualClock()
        apps = [await app_factory(clock), await app_factory(clock)]
        kind = f"raced-{fresh_id()}"
        ran: list[int] = []
        starters = []
        for app in apps:

            @app.workflow(name=kind, debounce=WINDOW)
            async def settle(ctx: Context, n: int) -> None:
                ran.append(n)

            starters.append(settle)
        handles = await asyncio.gather(*(starters[n % 2].start(n) for n in range(20)))
        assert len({handle.id for handle in handles}) == 1
        clock.advance(WINDOW)
        await asyncio.gather(*(app.run_until_idle(advance=False) for app in apps))
        assert len(ran) == 1
        assert ran[0] in range(20)


async def _slot(app: App, handle: WorkflowHandle[Any]) -> str:
    """The debounce slot the start record of ``handle``'s workflow names."""
    start = (await (await app.stores()).checkpointer.load(handle._key))["durably:start"]
    assert isinstance(start, dict)
    return str(start["debounce"])


async def _debounced(app: App, slot: str) -> str | None:
    """The workflow debounce ``slot`` names in the store (None: the store keeps no slot)."""
    queue = (await app.stores()).queue
    named: str | None = await queue.debounced(slot)  # type: ignore[attr-defined]
    return named
