"""The replay tester on histories with every kind of wait: a ``patched``, a ``recv``, a
sleep, a child, an event and the clock, at each point a workflow can stand still, and in
concurrent branches. Unchanged code replays each ok; nothing runs twice."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import BaseModel

import durably
from durably import ManualClock
from durably.testing import Finding, History, histories_from_store, replay

START = 1_000_000.0
APPROVAL = durably.Topic("approval", bool)
EFFECTS: list[str] = []


def onboarding(approval: durably.Topic[object] = APPROVAL) -> durably.App:
    """An App of the onboarding code on a fresh memory store."""
    app = durably.App("memory://", clock=ManualClock(START))

    @app.step(name="welcome")
    async def welcome(user: str) -> str:
        EFFECTS.append(f"welcome {user}")
        return f"mail to {user}"

    @app.step(name="open")
    async def open_account(user: str) -> int:
        EFFECTS.append(f"open {user}")
        return 42

    @app.workflow(name="account")
    async def account(ctx: durably.Context, user: str) -> int:
        await ctx.sleep(timedelta(minutes=1))  # the bank takes a minute
        return await open_account(user)

    @app.workflow(name="onboard")
    async def onboard(ctx: durably.Context, user: str) -> str:
        if await ctx.patched("welcome-mail"):
            await welcome(user)
        approved = await ctx.recv(approval, timeout=timedelta(days=1))
        await ctx.sleep(timedelta(minutes=5))
        number = await ctx.child(account, user)
        await ctx.set_event("stage", "open")
        opened = await ctx.now()
        return f"{number} approved={approved} at {opened.timestamp():.0f}"

    return app


async def _history(app: durably.App, id: str) -> History:
    (history,) = await histories_from_store(await app.stores(), [id])
    return history


async def test_a_history_with_patched_recv_sleep_and_child_replays_ok_at_every_stage() -> None:
    app = onboarding()
    clock = app.clock
    assert isinstance(clock, ManualClock)
    stages: list[tuple[History, float, str]] = []
    async with app:
        handle = await app.workflows["onboard"].start("ada", id="ada")
        await app.run_until_idle(advance=False)
        stages.append((await _history(app, "ada"), clock.now(), "waits asleep until"))
        await handle.send(APPROVAL, True)
        stages.append((await _history(app, "ada"), clock.now(), "waits asleep until"))
        await app.run_until_idle(advance=False)
        stages.append((await _history(app, "ada"), clock.now(), "waits asleep until"))
        clock.advance(300)
        await app.run_until_idle(advance=False)
        stages.append((await _history(app, "ada"), clock.now(), "waits for its child"))
        await app.run_until_idle()
        assert await handle.result() == f"42 approved=True at {START + 360:.0f}"
        stages.append((await _history(app, "ada"), clock.now(), "completed"))
        child = (await _history(app, "ada/child:account#1"), clock.now(), "completed")
    effects = list(EFFECTS)
    for history, now, ending in [*stages, child]:
        report = await replay(onboarding(), history, clock=ManualClock(now))
        (found,) = report.workflows
        assert found.ok, report.describe()
        assert found.ending.startswith(ending), (history.records, found)
    assert effects == EFFECTS  # the welcome mail and the account were never paid again


async def test_a_message_sent_but_not_yet_received_is_checked_against_the_topic() -> None:
    class Approval(BaseModel):
        by: str

    app = onboarding()
    async with app:
        handle = await app.workflows["onboard"].start("bob", id="bob")
        await app.run_until_idle(advance=False)
        await handle.send(APPROVAL, True)
        history = await _history(app, "bob")
    changed = durably.Topic("approval", Approval)
    report = await replay(onboarding(changed), history, clock=ManualClock(START))
    (found,) = report.workflows
    assert found.finding is Finding.INCOMPATIBLE_RECORD, found
    assert "no longer a valid Approval" in found.detail


GO = durably.Topic("go", str)


async def _recorded_by(body: str) -> History:
    """The history the ``fanout`` kind recorded when its body was ``body``."""
    app = durably.App("memory://", clock=ManualClock(START))

    @app.step(name="b")
    async def b(n: int) -> int:
        return n

    @app.workflow(name="fanout")
    async def fanout(ctx: durably.Context) -> int:
        if body == "b then wait":
            await b.keyed("1")(1)
            await ctx.recv(GO)
        else:  # "b in turn": its calls one after another, the last first
            for n in (3, 1, 2):
                await b.keyed(str(n))(n)
        return 0

    async with app:
        await fanout.start(id="f")
        await app.run_until_idle(advance=False)
        history = await _history(app, "f")
    # An ending the concurrent body below never reached: cut, as if its worker died.
    records = tuple(item for item in history.records if item[0] != "durably:result")
    return History(history.tenant, history.workflow, history.key, records)


def _concurrent(shape: str) -> durably.App:
    app = durably.App("memory://", clock=ManualClock(START))

    @app.step(name="b")
    async def b(n: int) -> int:
        EFFECTS.append(f"b {n}")
        return n

    @app.workflow(name="fanout")
    async def fanout(ctx: durably.Context) -> int:
        async def both() -> None:
            await asyncio.gather(b.keyed("1")(1), b.keyed("2")(2))

        if shape == "task group":
            async with asyncio.TaskGroup() as group:
                group.create_task(ctx.recv(GO))  # the branch that waits runs first
                # Its sibling reaches its records only after loop turns (it starts tasks):
                # the waiting branch's stop must not cancel it before.
                group.create_task(both())
            return 0
        values = await asyncio.gather(*(b.keyed(str(n))(n) for n in (1, 2, 3, 4)))
        return sum(values)

    return app


async def test_a_branch_that_waits_does_not_cut_its_sibling_short_of_its_records() -> None:
    history = await _recorded_by("b then wait")
    effects = list(EFFECTS)
    report = await replay(_concurrent("task group"), history)
    (found,) = report.workflows
    assert found.ok, report.describe()
    assert found.next_calls == ("b[2]",)
    assert found.unread == ()
    assert effects == EFFECTS


async def test_branches_recorded_in_any_order_replay_ok_and_stop_at_each_fresh_call() -> None:
    history = await _recorded_by("b in turn")
    effects = list(EFFECTS)
    report = await replay(_concurrent("gather"), history)
    (found,) = report.workflows
    assert found.ok, report.describe()
    assert found.next_calls == ("b[4]",)
    assert found.ending == "would run step 'b[4]' next"
    assert effects == EFFECTS
