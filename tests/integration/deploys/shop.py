"""What every version of the shop shares: its models, its steps and the ledger the steps
write (so a test sees, from outside durably, every effect that ran)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

import durably

KIND = "shop.fulfil"
"""The kind every version registers its body under."""
START = 1_700_000_000.0
"""When the shop's clock starts (a `durably.ManualClock`)."""

LEDGER: list[str] = []
"""Every effect a step ran, in order."""


class Order(BaseModel):
    id: str
    sku: str
    quantity: int
    cents: int


class Charge(BaseModel):
    id: str
    cents: int


class Receipt(BaseModel):
    order: str
    charge: str
    parcel: str


@dataclass(frozen=True)
class Steps:
    reserve: durably.Step[[str, int], str]
    charge: durably.Step[[str, int], Charge]
    ship: durably.Step[[str, str], str]


def steps(app: durably.App) -> Steps:
    """Register the steps every version calls on ``app``."""

    @app.step(name="reserve")
    async def reserve(sku: str, quantity: int) -> str:
        LEDGER.append(f"reserve {quantity} x {sku}")
        return f"res-{sku}"

    @app.step(name="charge")
    async def charge(order: str, cents: int) -> Charge:
        LEDGER.append(f"charge {order} {cents}")
        return Charge(id=f"ch-{order}", cents=cents)

    @app.step(name="ship")
    async def ship(order: str, reservation: str) -> str:
        LEDGER.append(f"ship {order} from {reservation}")
        return f"parcel-{order}"

    return Steps(reserve, charge, ship)


def shop(dsn: str) -> tuple[durably.App, Steps]:
    """An App of the shop over ``dsn`` on a manual clock, its common steps registered."""
    app = durably.App(dsn, clock=durably.ManualClock(START))
    return app, steps(app)


ORDER = Order(id="o-1", sku="lamp", quantity=2, cents=4999)
