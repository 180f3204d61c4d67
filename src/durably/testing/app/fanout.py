"""`AppFanOut`: a body gathering far more steps than the store has connections, and far
more handles waiting at once, on the App's default settings: every step runs once and
every waiter gets its result."""

from __future__ import annotations

import asyncio
from collections import Counter

from durably.app import App, Context
from durably.clock import SystemClock
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFactory, AppFixtures

WIDE = 1_000
"""Steps gathered in one body: a hundred times a default PostgreSQL pool."""
WAITERS = 500
"""Handles awaiting their results at once."""


class AppFanOut(AppFixtures):
    """Fan-outs wider than the pool, counted from the steps themselves."""

    async def test_a_thousand_gathered_steps_each_run_once_and_the_pass_completes(
        self, app: App
    ) -> None:
        ran: Counter[int] = Counter()

        @app.step
        async def touch(n: int) -> int:
            ran[n] += 1
            return n

        @app.workflow
        async def wide(ctx: Context) -> int:
            return sum(await asyncio.gather(*(touch(n) for n in range(WIDE))))

        handle = await wide.start()
        passes = await app.run_until_idle()
        assert await handle.result(timeout=60) == sum(range(WIDE))
        assert passes == 1  # no pass failed on a busy pool and ran again
        assert sorted(ran) == list(range(WIDE))
        assert set(ran.values()) == {1}

    async def test_a_thousand_gathered_plain_steps_each_run_once_under_serve(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(SystemClock())
        ran: Counter[int] = Counter()

        @app.step
        def touch(n: int) -> int:  # run in a thread: slower to come back than a coroutine
            ran[n] += 1
            return n

        @app.workflow
        async def wide(ctx: Context) -> int:
            return sum(await asyncio.gather(*(touch(n) for n in range(WIDE))))

        serving = asyncio.create_task(app.serve(signals=False))
        try:
            handle = await wide.start()
            assert await handle.result(timeout=120) == sum(range(WIDE))
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        assert sorted(ran) == list(range(WIDE))
        assert set(ran.values()) == {1}
        assert (await handle.status()).attempts == 0  # the body never failed

    async def test_five_hundred_handles_waiting_at_once_each_get_their_result(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(SystemClock())
        ran: Counter[int] = Counter()

        @app.step
        async def double(n: int) -> int:
            ran[n] += 1
            return n * 2

        @app.workflow
        async def one(ctx: Context, n: int) -> int:
            return await double(n)

        handles = [await one.start(n) for n in range(WAITERS)]
        # Every waiter is looking before the first workflow runs.
        waiting = [asyncio.create_task(h.result(timeout=120)) for h in handles]
        await asyncio.sleep(0.05)
        serving = asyncio.create_task(app.serve(signals=False))
        try:
            results = await asyncio.gather(*waiting)
        finally:
            serving.cancel()
            await asyncio.gather(serving, *waiting, return_exceptions=True)
        assert results == [n * 2 for n in range(WAITERS)]
        assert sorted(ran) == list(range(WAITERS))
        assert set(ran.values()) == {1}
        statuses = {(await h.status()).status for h in handles[:: WAITERS // 10]}
        assert statuses == {WorkflowStatus.COMPLETED}


__all__ = ["WAITERS", "WIDE", "AppFanOut"]
