"""`AppDeployCheck`: the replay tester over the backing's own store.

It reads the workflows in flight, by id or all of a kind, replays them against the code
deployed now and against a changed body, and writes nothing to the store it read.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from durably.app import App, Context
from durably.clock import ManualClock
from durably.stores.opening import Stores
from durably.testing.app.fixtures import AppFactory, AppFixtures, fresh_id
from durably.testing.replay import Finding, histories_from_store, in_flight_histories, replay


class AppDeployCheck(AppFixtures):
    """What the replay tester reads from each backing, and that it leaves it untouched."""

    async def test_workflows_in_flight_are_read_replayed_and_left_untouched(
        self, app: App, app_factory: AppFactory
    ) -> None:
        paid: list[int] = []
        kind = f"deploy-{fresh_id()}"

        @app.step(name="charge")
        async def charge(cents: int) -> int:
            paid.append(cents)
            return cents

        @app.workflow(name=kind)
        async def order(ctx: Context, cents: int) -> int:
            charged = await charge(cents)
            await ctx.sleep(timedelta(hours=1))
            return charged

        finished = await order.start(200, id=fresh_id())
        await app.run_until_idle()
        assert await finished.result(timeout=5) == 200
        ids = [fresh_id() for _ in range(3)]
        for id in ids:
            await order.start(100, id=id)
        await app.run_until_idle(advance=False)
        stores = await app.stores()
        before = await _snapshot(stores, [*ids, finished.id])
        in_flight = await in_flight_histories(stores, kind=kind)
        assert sorted(history.workflow for history in in_flight) == sorted(ids)
        report = await replay(app, in_flight)
        assert report.ok, report.describe()
        assert {found.ending.split(" until ")[0] for found in report.workflows} == {"waits asleep"}

        # A deploy that charges a fee: every order in flight called the charge otherwise.
        deployed = await app_factory(ManualClock())

        @deployed.step(name="charge")
        async def charge_with_fee(cents: int) -> int:
            paid.append(cents)
            return cents

        @deployed.workflow(name=kind)
        async def order_with_fee(ctx: Context, cents: int) -> int:
            charged = await charge_with_fee(cents + 5)
            await ctx.sleep(timedelta(hours=1))
            return charged

        drifted = await replay(deployed, in_flight)
        assert [found.finding for found in drifted.workflows] == [Finding.ARGUMENT_DRIFT] * 3
        assert await _snapshot(stores, [*ids, finished.id]) == before
        assert sorted(paid) == [100, 100, 100, 200]  # one charge each, none by a replay

    async def test_a_finished_workflow_of_a_tenant_is_read_by_id_and_replays_ok(
        self, app: App
    ) -> None:
        tenant = f"tenant-{fresh_id()}"

        @app.step
        async def greet(name: str) -> str:
            return f"hello {name}"

        @app.workflow
        async def greeter(ctx: Context, name: str) -> str:
            return await greet(name)

        handle = await greeter.start("ada", id="same-id", tenant=tenant)
        await greeter.start("bob", id="same-id")  # the default tenant's, another workflow
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "hello ada"
        stores = await app.stores()
        (history,) = await histories_from_store(stores, ["same-id"], tenant=tenant)
        assert (history.tenant, history.status, history.records[0][1]["args"]) == (  # type: ignore[index]
            tenant,
            "completed",
            {"name": "ada"},
        )
        report = await replay(app, history)
        assert report.ok, report.describe()
        assert report.workflows[0].ending == "completed"


async def _snapshot(stores: Stores, ids: list[str]) -> list[Any]:
    """Every record (with the time it landed) and the status of workflows ``ids``."""
    checkpointer = stores.checkpointer
    return [(await checkpointer.history(id), await checkpointer.get_status(id)) for id in ids]


__all__ = ["AppDeployCheck"]
