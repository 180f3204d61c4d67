"""The shop as deployed while its orders are in flight: reserve, charge, wait for the
warehouse, ship."""

from __future__ import annotations

from datetime import timedelta

import durably
from tests.integration.deploys.shop import KIND, ORDER, Order, Receipt, shop


def build(dsn: str) -> durably.App:
    """The App of this version over ``dsn``."""
    app, steps = shop(dsn)

    @app.workflow(name=KIND)
    async def fulfil(ctx: durably.Context, order: Order) -> Receipt:
        reservation = await steps.reserve(order.sku, order.quantity)
        charged = await steps.charge(order.id, order.cents)
        await ctx.sleep(timedelta(hours=1))  # the warehouse picks the parcel
        parcel = await steps.ship(order.id, reservation)
        return Receipt(order=order.id, charge=charged.id, parcel=parcel)

    return app


async def take_orders(dsn: str, *tenants: str) -> None:
    """Over ``dsn``: order ``o-2`` fulfilled to the end, then ``o-1`` waiting for the
    warehouse (asleep for an hour), and so in each of ``tenants`` besides."""
    app = build(dsn)
    fulfil = app.workflows[KIND]
    async with app:
        await fulfil.start(Order(id="o-2", sku="desk", quantity=1, cents=25000), id="o-2")
        await app.run_until_idle()
        for tenant in ("default", *tenants):
            await fulfil.start(ORDER, id="o-1", tenant=tenant)
        await app.run_until_idle(advance=False)
        assert (await (await fulfil.get_handle("o-1")).status()).status.value == "sleeping"
