"""Changes a deploy may make to the shop under orders in flight, one App each, all under
the kind ``shop_v1`` registered."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

import durably
from tests.integration.deploys.shop import KIND, LEDGER, Order, Receipt, shop

FEE = 99


def with_fee(dsn: str) -> durably.App:
    """Argument drift: the charge now adds a fee, so the recorded call had other arguments."""
    app, steps = shop(dsn)

    @app.workflow(name=KIND)
    async def fulfil(ctx: durably.Context, order: Order) -> Receipt:
        reservation = await steps.reserve(order.sku, order.quantity)
        charged = await steps.charge(order.id, order.cents + FEE)
        await ctx.sleep(timedelta(hours=1))
        parcel = await steps.ship(order.id, reservation)
        return Receipt(order=order.id, charge=charged.id, parcel=parcel)

    return app


def authorize_first(dsn: str) -> durably.App:
    """Step replacement: an authorization where the charge was."""
    app, steps = shop(dsn)

    @app.step(name="authorize")
    async def authorize(order: str, cents: int) -> str:
        LEDGER.append(f"authorize {order} {cents}")
        return f"auth-{order}"

    @app.workflow(name=KIND)
    async def fulfil(ctx: durably.Context, order: Order) -> Receipt:
        reservation = await steps.reserve(order.sku, order.quantity)
        authorization = await authorize(order.id, order.cents)
        await ctx.sleep(timedelta(hours=1))
        parcel = await steps.ship(order.id, reservation)
        return Receipt(order=order.id, charge=authorization, parcel=parcel)

    return app


def fraud_check(dsn: str) -> durably.App:
    """Step insertion: a fraud check before the charge, unguarded."""
    return _fraud_checked(dsn, guarded=False)


def patched_fraud_check(dsn: str) -> durably.App:
    """The same insertion done right: guarded by ``ctx.patched``, so orders already past
    it keep their recorded path."""
    return _fraud_checked(dsn, guarded=True)


def _fraud_checked(dsn: str, *, guarded: bool) -> durably.App:
    app, steps = shop(dsn)

    @app.step(name="fraud-check")
    async def check(order: str) -> bool:
        LEDGER.append(f"fraud-check {order}")
        return True

    @app.workflow(name=KIND)
    async def fulfil(ctx: durably.Context, order: Order) -> Receipt:
        reservation = await steps.reserve(order.sku, order.quantity)
        if not guarded or await ctx.patched("fraud-check"):
            await check(order.id)
        charged = await steps.charge(order.id, order.cents)
        await ctx.sleep(timedelta(hours=1))
        parcel = await steps.ship(order.id, reservation)
        return Receipt(order=order.id, charge=charged.id, parcel=parcel)

    return app


def charge_first(dsn: str) -> durably.App:
    """Reordering: the charge moved before the reservation."""
    app, steps = shop(dsn)

    @app.workflow(name=KIND)
    async def fulfil(ctx: durably.Context, order: Order) -> Receipt:
        charged = await steps.charge(order.id, order.cents)
        reservation = await steps.reserve(order.sku, order.quantity)
        await ctx.sleep(timedelta(hours=1))
        parcel = await steps.ship(order.id, reservation)
        return Receipt(order=order.id, charge=charged.id, parcel=parcel)

    return app


def no_reservation(dsn: str) -> durably.App:
    """Step removal: the reservation dropped (the warehouse reserves on its own)."""
    app, steps = shop(dsn)

    @app.workflow(name=KIND)
    async def fulfil(ctx: durably.Context, order: Order) -> Receipt:
        charged = await steps.charge(order.id, order.cents)
        await ctx.sleep(timedelta(hours=1))
        parcel = await steps.ship(order.id, "warehouse")
        return Receipt(order=order.id, charge=charged.id, parcel=parcel)

    return app


class ChargeInCurrency(BaseModel):
    """The charge's value after a deploy added a required field (an unsafe model change)."""

    id: str
    cents: int
    currency: str


def charge_in_currency(dsn: str) -> durably.App:
    """An incompatible record: the charge's recorded value lacks the new required field."""
    app = durably.App(dsn, clock=durably.ManualClock())

    @app.step(name="reserve")
    async def reserve(sku: str, quantity: int) -> str:
        return f"res-{sku}"

    @app.step(name="charge")
    async def charge(order: str, cents: int) -> ChargeInCurrency:
        return ChargeInCurrency(id=f"ch-{order}", cents=cents, currency="EUR")

    @app.workflow(name=KIND)
    async def fulfil(ctx: durably.Context, order: Order) -> Receipt:
        reservation = await reserve(order.sku, order.quantity)
        charged = await charge(order.id, order.cents)
        await ctx.sleep(timedelta(hours=1))
        return Receipt(order=order.id, charge=charged.id, parcel=reservation)

    return app


class Limit(Exception):
    """An order over the shop's new limit."""


def order_limit(dsn: str) -> durably.App:
    """A body that now fails on a recorded value: orders over a new limit are refused."""
    app, steps = shop(dsn)

    @app.workflow(name=KIND)
    async def fulfil(ctx: durably.Context, order: Order) -> Receipt:
        reservation = await steps.reserve(order.sku, order.quantity)
        charged = await steps.charge(order.id, order.cents)
        if charged.cents > 1000:
            raise Limit(f"order {order.id} is over the limit")
        await ctx.sleep(timedelta(hours=1))
        parcel = await steps.ship(order.id, reservation)
        return Receipt(order=order.id, charge=charged.id, parcel=parcel)

    return app
