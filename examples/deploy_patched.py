"""Changing a workflow under in-flight runs with `ctx.patched`.

Version 1 of an order workflow charges the card, waits for the warehouse, then ships.
Version 2 also e-mails a receipt after the charge. Orders that were already past the
charge when version 2 was deployed must not suddenly see a new step in the middle of
their record (a replay would find a record it did not expect), so the new code sits
behind `ctx.patched("receipt")`: True for orders that reach that point on the new code,
False for orders whose earlier passes went past it on the old code. Run it:

    python examples/deploy_patched.py

It plays both deploys in one process over one SQLite file: a worker of version 1 takes
an order to its wait and stops; then a worker of version 2 takes over, starts a second
order, and both finish.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import Awaitable, Callable

import durably

DSN = os.environ.get("DURABLY_DSN") or f"sqlite:///{tempfile.mkdtemp()}/orders.db"
SHIPPED = durably.Topic("shipped", str)
# Workflow ids are idempotency keys: over a database kept between runs, each run names its
# own orders (a second run would otherwise find them finished).
RUN = uuid.uuid4().hex[:8]


def make_app(version: int) -> tuple[durably.App, durably.Workflow[[str], list[str]]]:
    """The application as deployed at ``version`` (both use the same workflow kind)."""
    app = durably.App(DSN)

    @app.step(name="charge")
    async def charge(order: str) -> str:
        return f"charged {order}"

    @app.step(name="send-receipt")
    async def send_receipt(order: str) -> str:
        return f"receipt for {order}"

    @app.workflow(name="order")
    async def order(ctx: durably.Context, order_id: str) -> list[str]:
        done = [await charge(order_id)]
        if version >= 2 and await ctx.patched("receipt"):
            done.append(await send_receipt(order_id))
        tracking = await ctx.recv(SHIPPED)
        done.append(f"shipped as {tracking}")
        return done

    return app, order


async def serve_for_a_while(app: durably.App, work: Callable[[], Awaitable[None]]) -> None:
    serving = asyncio.create_task(app.serve(signals=False))
    try:
        await work()
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)


async def main() -> None:
    v1, order_v1 = make_app(1)

    async def before_the_deploy() -> None:
        handle = await order_v1.start("order-1", id=f"order-1-{RUN}")
        async with asyncio.timeout(30):
            while (await handle.status()).status is not durably.WorkflowStatus.BLOCKED:
                await asyncio.sleep(0.05)  # charged, now waiting for the warehouse

    await serve_for_a_while(v1, before_the_deploy)
    await v1.close()

    v2, order_v2 = make_app(2)

    async def after_the_deploy() -> None:
        orders = {
            "order-1": await order_v2.get_handle(f"order-1-{RUN}"),
            "order-2": await order_v2.start("order-2", id=f"order-2-{RUN}"),
        }
        for name, handle in orders.items():
            await handle.send(SHIPPED, f"TRACK-{name}")
        for name, handle in orders.items():
            print(name, await handle.result(timeout=30))

    await serve_for_a_while(v2, after_the_deploy)
    await v2.close()


if __name__ == "__main__":
    asyncio.run(main())
