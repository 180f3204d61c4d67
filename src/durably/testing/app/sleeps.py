"""`AppSleeps`: durable sleeps to a duration or to a point in time. `sleep_until` returns at
once for a time already past, sleeps until a later one (the first pass's deadline kept),
refuses a naive datetime before recording anything; `sleep(0)` returns at once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from durably.app import App, Context
from durably.clock import ManualClock
from durably.errors import InvalidInputError
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFixtures, fresh_id


class AppSleeps(AppFixtures):
    async def test_sleep_until_a_time_already_past_returns_at_once(self, app: App) -> None:
        @app.workflow(name=f"past-{fresh_id()}")
        async def late(ctx: Context) -> str:
            await ctx.sleep_until(await ctx.now() - timedelta(hours=1))
            return "on time"

        handle = await late.start()
        assert await app.run_until_idle(advance=False) == 1
        assert await handle.result(timeout=5) == "on time"

    async def test_sleep_until_a_later_time_sleeps_until_it_in_any_timezone(self, app: App) -> None:
        clock = app.clock
        assert isinstance(clock, ManualClock)
        elsewhere = timezone(timedelta(hours=-5))

        @app.workflow(name=f"later-{fresh_id()}")
        async def waits(ctx: Context) -> float:
            start = await ctx.now()
            await ctx.sleep_until(start.astimezone(elsewhere) + timedelta(hours=2))
            return (await ctx.now() - start).total_seconds()

        handle = await waits.start()
        assert await app.run_until_idle(advance=False) == 1
        assert (await handle.status()).status is WorkflowStatus.SLEEPING
        clock.advance(7199)
        assert await app.run_until_idle(advance=False) == 0  # not due yet
        clock.advance(1)
        assert await app.run_until_idle(advance=False) == 1
        assert await handle.result(timeout=5) == 7200.0

    async def test_sleep_until_refuses_a_naive_datetime_before_recording_anything(
        self, app: App
    ) -> None:
        @app.workflow(name=f"naive-{fresh_id()}")
        async def naive(ctx: Context) -> str:
            try:
                await ctx.sleep_until(datetime(2030, 1, 1))
            except InvalidInputError as exc:
                return str(exc)
            return "slept"

        handle = await naive.start()
        await app.run_until_idle()
        assert "timezone" in await handle.result(timeout=5)
        stored = await (await app.stores()).checkpointer.load(handle.id)
        assert not [key for key in stored if "sleep" in key]

    async def test_sleep_zero_returns_at_once_and_a_negative_sleep_is_refused(
        self, app: App
    ) -> None:
        @app.workflow(name=f"zero-{fresh_id()}")
        async def naps(ctx: Context) -> str:
            await ctx.sleep(0)
            await ctx.sleep(timedelta(0))
            try:
                await ctx.sleep(-1)
            except InvalidInputError:
                return "refused"
            return "slept"

        handle = await naps.start()
        assert await app.run_until_idle(advance=False) == 1
        assert await handle.result(timeout=5) == "refused"


__all__ = ["AppSleeps"]
