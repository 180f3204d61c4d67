"""`AppDrift`: a body changed under an in-flight workflow. A step called where an earlier
pass recorded another (replaced, inserted, reordered, removed) parks the workflow with a
`NondeterminismError` naming both, before any effect runs, and ``handle.resume()`` goes on
once the code is fixed; concurrency and ``ctx.patched`` never pass for drift; a workflow
that ends without reading some of its records says so in a warning."""

from __future__ import annotations

import asyncio
import logging

import pytest

from durably.app import App, Context
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFixtures, fails_once, fresh_id

ORIGINAL = ["reserve", "charge"]
"""The steps the workflows here start with, in order (then a sleep, then the end)."""

CHANGES = {
    # change: (the steps the deployed body calls, the step recorded where it drifts, the new one)
    "replaced": (["reserve", "refund"], "charge#1", "refund#1"),
    "inserted": (["reserve", "audit", "charge"], "charge#1", "audit#1"),
    "reordered": (["charge", "reserve"], "reserve#1", "charge#1"),
    "removed": (["charge"], "reserve#1", "charge#1"),
}


class AppDrift(AppFixtures):
    @pytest.mark.parametrize("change", list(CHANGES))
    async def test_a_step_called_where_another_was_recorded_parks_until_fixed(
        self, app: App, change: str
    ) -> None:
        deployed = {"steps": ORIGINAL}
        paid: list[str] = []

        def step_named(name: str) -> object:
            @app.step(name=name)
            async def effect(order: str) -> str:
                paid.append(name)
                return f"{name}:{order}"

            return effect

        steps = {name: step_named(name) for name in ["reserve", "charge", "refund", "audit"]}

        @app.workflow(name=f"order-{fresh_id()}")
        async def order(ctx: Context, number: str) -> list[str]:
            done = [await steps[name](number) for name in deployed["steps"]]  # type: ignore[operator]
            await ctx.sleep(60)
            return done

        handle = await order.start("o-1")
        await app.run_until_idle(advance=False)  # pass 1: both steps recorded, then asleep
        calls, recorded, new = CHANGES[change]
        deployed["steps"] = calls  # a deploy changes the body under the sleeping workflow
        await app.run_until_idle()
        info = await handle.status()
        assert info.status is WorkflowStatus.PARKED
        assert "NondeterminismError" in str(info.last_error)
        assert repr(recorded) in str(info.last_error)
        assert repr(new) in str(info.last_error)
        assert paid == ORIGINAL  # parked before the changed call paid anything

        deployed["steps"] = ORIGINAL  # the fix: deploy the body the workflow started on
        assert await handle.resume()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == ["reserve:o-1", "charge:o-1"]
        assert paid == ORIGINAL

    async def test_a_change_behind_patched_replays_the_old_path_without_drift(
        self, app: App
    ) -> None:
        deployed = {"patched": False}
        paid: list[str] = []

        @app.step(name="reserve")
        async def reserve() -> str:
            paid.append("reserve")
            return "reserved"

        @app.step(name="audit")
        async def audit() -> str:
            paid.append("audit")
            return "audited"

        @app.step(name="charge")
        async def charge() -> str:
            paid.append("charge")
            return "charged"

        @app.workflow(name=f"patched-{fresh_id()}")
        async def order(ctx: Context) -> list[str]:
            done = [await reserve()]
            if deployed["patched"] and await ctx.patched("audit-orders"):
                done.append(await audit())
            done.append(await charge())
            await ctx.sleep(60)
            return done

        in_flight = await order.start()
        await app.run_until_idle(advance=False)
        deployed["patched"] = True
        fresh = await order.start()
        await app.run_until_idle()
        assert await in_flight.result(timeout=5) == ["reserved", "charged"]
        assert await fresh.result(timeout=5) == ["reserved", "audited", "charged"]
        assert paid == ["reserve", "charge", "reserve", "audit", "charge"]

    @pytest.mark.parametrize("style", ["ctx.gather", "asyncio.gather"])
    async def test_steps_landing_in_another_order_than_called_are_not_drift(
        self, app: App, style: str
    ) -> None:
        first_landed = asyncio.Event()

        @app.step
        async def slow(n: int) -> int:
            await first_landed.wait()  # lands after the step called after it
            return n

        @app.step
        async def fast(n: int) -> int:
            return n

        async def branch(n: int) -> int:
            value = await fast(n)
            first_landed.set()
            return value + await fast(n + 1)

        @app.workflow(name=f"landing-{fresh_id()}")
        async def order(ctx: Context) -> list[int]:
            aws = [slow(1), branch(10), fast(2)]
            together = await (ctx.gather(*aws) if style == "ctx.gather" else asyncio.gather(*aws))
            await ctx.sleep(60)
            return [*together, await fast(3)]

        handle = await order.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == [1, 21, 2, 3]

    async def test_a_workflow_that_ends_with_records_it_never_read_warns_naming_them(
        self, app: App, caplog: pytest.LogCaptureFixture
    ) -> None:
        deployed = {"steps": ["reserve", "charge"]}

        @app.step(name="reserve")
        async def reserve() -> str:
            return "reserved"

        @app.step(name="charge")
        async def charge() -> str:
            return "charged"

        calls = {"reserve": reserve, "charge": charge}

        @app.workflow(name=f"unread-{fresh_id()}")
        async def order(ctx: Context) -> list[str]:
            done = [await calls[name]() for name in deployed["steps"]]
            await ctx.sleep(60)
            return done

        handle = await order.start()
        await app.run_until_idle(advance=False)
        deployed["steps"] = ["reserve"]  # the last step removed: nothing calls it again
        with caplog.at_level(logging.WARNING, logger="durably.workflow"):
            await app.run_until_idle()
        assert await handle.result(timeout=5) == ["reserved"]
        warnings = [r.getMessage() for r in caplog.records if r.name.startswith("durably.workflow")]
        assert len(warnings) == 1
        assert "'charge#1'" in warnings[0]
        assert handle.id in warnings[0]
        assert "'reserve#1'" not in warnings[0]

    async def test_a_workflow_that_read_every_record_does_not_warn(
        self, app: App, caplog: pytest.LogCaptureFixture
    ) -> None:
        tries: list[int] = []
        flaky = fails_once(app, tries)

        @app.workflow(name=f"tidy-{fresh_id()}")
        async def order(ctx: Context) -> str:
            value = await flaky()
            await ctx.sleep(60)
            await ctx.gather(ctx.sleep(1), ctx.now())
            return value

        handle = await order.start()
        with caplog.at_level(logging.WARNING, logger="durably.workflow"):
            await app.run_until_idle()
        assert await handle.result(timeout=5) == "recovered"
        assert tries == [1, 1]  # its retry's deadline is a record the last pass never read
        assert not [r for r in caplog.records if "without reading" in r.getMessage()]


__all__ = ["AppDrift"]
