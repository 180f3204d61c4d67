"""The shop as deployed while its orders are in flight: reserve, charge, wait for the
warehouse, ship."""

from __future__ import annotations

from datetime import timedelta

import durably
from tests.integration.deploys.shop import KIND, Order, Receipt, shop


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
