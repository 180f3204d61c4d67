"""`AppDelays`: delayed starts (``start(delay=)``, ``start(at=)``) begin their body at
their time on the App's clock, hold no worker until then and keep their handle valid (bad
input is refused before any I/O: tests/unit/test_app_delays.py).

When each body began is read from what it wrote, never from the App.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from durably.app import App, Context
from durably.clock import ManualClock
from durably.errors import InvalidInputError
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFixtures, fresh_id

DELAY = 3600.0


class AppDelays(AppFixtures):
    async def test_a_delayed_start_begins_at_its_time_and_not_before(self, app: App) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)
        began: list[float] = []

        @app.workflow(name=f"later-{fresh_id()}")
        async def later(ctx: Context, n: int) -> int:
            began.append(clock.now())
            return n

        started_at = clock.now()
        handle = await later.start(7, delay=timedelta(seconds=DELAY))
        assert handle.created
        await app.run_until_idle(advance=False)
        assert began == []
        assert (await handle.status()).status is WorkflowStatus.SLEEPING
        clock.advance(DELAY - 1)
        await app.run_until_idle(advance=False)
        assert began == []  # a second early
        clock.advance(1)
        await app.run_until_idle(advance=False)
        assert began == [started_at + DELAY]
        assert await handle.result(timeout=5) == 7

    async def test_a_start_at_a_time_begins_then_and_one_in_the_past_at_once(
        self, app: App
    ) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)
        began: dict[str, float] = {}

        @app.workflow(name=f"at-{fresh_id()}")
        async def at_time(ctx: Context, name: str) -> str:
            began[name] = clock.now()
            return name

        now = datetime.fromtimestamp(clock.now(), UTC)
        later = await at_time.start("later", at=now + timedelta(minutes=5))
        past = await at_time.start("past", at=now - timedelta(days=1))
        await app.run_until_idle()  # advances the clock through the wait
        assert await later.result(timeout=5) == "later"
        assert await past.result(timeout=5) == "past"
        assert began["past"] == now.timestamp()
        assert began["later"] == (now + timedelta(minutes=5)).timestamp()

    async def test_a_delayed_workflow_cancelled_before_its_time_never_runs_its_body(
        self, app: App
    ) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)
        began: list[str] = []

        @app.workflow(name=f"called-off-{fresh_id()}")
        async def called_off(ctx: Context) -> None:
            began.append(ctx.id)

        handle = await called_off.start(delay=DELAY)
        await app.run_until_idle(advance=False)  # now waiting to begin
        assert await handle.cancel()
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
        assert began == []

    async def test_a_delayed_start_keeps_its_timeout_from_when_its_body_begins(
        self, app: App
    ) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)

        @app.workflow(name=f"timed-{fresh_id()}")
        async def quick(ctx: Context) -> str:
            return "in time"

        handle = await quick.start(delay=DELAY, timeout=60)
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "in time"

    async def test_a_child_cannot_be_delayed(self, app: App) -> None:
        @app.workflow(name=f"leaf-{fresh_id()}")
        async def leaf(ctx: Context) -> None:
            return None

        @app.workflow(name=f"parent-{fresh_id()}")
        async def parent(ctx: Context) -> str:
            try:
                await ctx.child(leaf.options(delay=5))
            except InvalidInputError as exc:
                return str(exc)
            return "started"

        handle = await parent.start()
        await app.run_until_idle()
        assert "begins at once" in await handle.result(timeout=5)


__all__ = ["AppDelays"]
