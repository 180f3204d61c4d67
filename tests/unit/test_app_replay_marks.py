"""A workflow knows where its earlier passes got to, so `ctx.patched` answers rightly.

A pass that suspends at a wait leaves a record of having reached it, and the records a
wait keeps (its deadline, that it waited) count as met on every later pass: code changed
before a wait an earlier pass reached takes the old path, code reached for the first time
after a wait takes the new one.
"""

from __future__ import annotations

import durably
from durably import ManualClock

TOPIC = durably.Topic("go", str)


async def test_a_change_before_a_wait_an_earlier_pass_reached_takes_the_old_path() -> None:
    deployed = {"version": 1}
    app = durably.App("memory://", clock=ManualClock(1_000.0))

    @app.workflow(name="order")
    async def order(ctx: durably.Context) -> list[str]:
        done = ["charged"]
        if deployed["version"] >= 2 and await ctx.patched("receipt"):
            done.append("receipt")
        done.append(f"shipped {await ctx.recv(TOPIC)}")
        return done

    async with app:
        old = await order.start(id="old")
        await app.run_until_idle(advance=False)  # version 1 waits at recv
        deployed["version"] = 2
        new = await order.start(id="new")
        await app.run_until_idle(advance=False)
        for handle in (old, new):
            await handle.send(TOPIC, handle.id)
        await app.run_until_idle(advance=False)
        assert await old.result() == ["charged", "shipped old"]
        assert await new.result() == ["charged", "receipt", "shipped new"]


async def test_code_first_reached_after_a_timed_wait_that_got_its_message_is_new() -> None:
    app = durably.App("memory://", clock=ManualClock(1_000.0))
    seen: list[bool] = []

    @app.workflow(name="waits")
    async def waits(ctx: durably.Context) -> str | None:
        got = await ctx.recv(TOPIC, timeout=60)
        seen.append(await ctx.patched("after-the-wait"))
        return got

    async with app:
        handle = await waits.start(id="w")
        await app.run_until_idle(advance=False)  # waits, its deadline recorded
        await handle.send(TOPIC, "hello")
        await app.run_until_idle(advance=False)
        assert await handle.result() == "hello"
        assert seen == [True]
