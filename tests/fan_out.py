"""The workloads the pool-bound tests run on each backing: a body gathering many steps
beside many handles waiting at once, a body whose batches of steps a stalled store holds
back, and every kind of waiter idle at once. Steps count their own runs, so a step run
twice shows."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

from durably import App, Context, Topic, Workflow, WorkflowStatus
from tests.serving import served


async def fan_out_beside_waiters(app: App, *, wide: int, waiters: int) -> None:
    """Serve one workflow gathering ``wide`` steps and ``waiters`` one-step workflows
    whose handles all wait at once; every result arrives, each step ran once and no
    pass failed."""
    ran: Counter[str] = Counter()

    @app.step
    async def touch(n: int) -> int:
        ran[f"touch-{n}"] += 1
        return n

    @app.workflow
    async def fan(ctx: Context) -> int:
        return sum(await asyncio.gather(*(touch(n) for n in range(wide))))

    @app.step
    async def double(n: int) -> int:
        ran[f"double-{n}"] += 1
        return n * 2

    @app.workflow
    async def one(ctx: Context, n: int) -> int:
        return await double(n)

    handles = await asyncio.gather(*(one.start(n) for n in range(waiters)))
    waiting = [asyncio.ensure_future(h.result(timeout=120)) for h in handles]
    handle = await fan.start()
    try:
        async with served(app):
            assert await handle.result(timeout=120) == sum(range(wide))
            assert await asyncio.gather(*waiting) == [n * 2 for n in range(waiters)]
    finally:
        await asyncio.gather(*waiting, return_exceptions=True)
    assert (await handle.status()).attempts == 0  # no pass failed on a busy pool
    assert len(ran) == wide + waiters
    assert set(ran.values()) == {1}


class Batches:
    """A workflow of three batches of ``size`` gathered steps (later batches start while
    a stall holds the first back); ``first`` is set once a step ran."""

    def __init__(self, app: App, size: int) -> None:
        self.size = size
        self.ran: Counter[int] = Counter()
        self.first = asyncio.Event()

        @app.step
        async def touch(n: int) -> int:
            self.ran[n] += 1
            self.first.set()
            await asyncio.sleep(0.001 * (n % 7))
            return n

        @app.workflow
        async def batches(ctx: Context) -> int:
            total = 0
            for batch in range(3):
                steps = (touch(batch * size + n) for n in range(size))
                total += sum(await asyncio.gather(*steps))
            return total

        self.workflow: Workflow[[], int] = batches

    @property
    def total(self) -> int:
        """What the workflow returns."""
        return sum(range(3 * self.size))

    def ran_each_once(self) -> bool:
        """Whether every step ran, and ran once."""
        return sorted(self.ran) == list(range(3 * self.size)) and set(self.ran.values()) == {1}


GO = Topic("go", str)


async def every_waiter_at_once(app: App, while_waiting: Callable[[], Awaitable[None]]) -> None:
    """Serve two workflow kinds and a task queue while a handle waits for a workflow
    blocked on a message: once the task ran, each kind handed out a workflow and all of
    them wait idle, call ``while_waiting``; then the message ends the workflow (its waiter
    wakes) and the task ran once."""
    ran: Counter[int] = Counter()

    @app.task
    async def note(n: int) -> None:
        ran[n] += 1

    @app.workflow
    async def gated(ctx: Context) -> str | None:
        return await ctx.recv(GO)

    @app.workflow
    async def quick(ctx: Context) -> int:
        return 1

    handle = await gated.start()
    async with served(app):
        waiting = asyncio.ensure_future(handle.result(timeout=60))
        assert await (await quick.start()).result(timeout=60) == 1
        await note.enqueue(1)
        for _ in range(600):
            if ran and (await handle.status()).status is WorkflowStatus.BLOCKED:
                break
            await asyncio.sleep(0.05)
        assert ran
        assert (await handle.status()).status is WorkflowStatus.BLOCKED
        await asyncio.sleep(0.3)  # the worker's loops settle into their waits
        await while_waiting()
        await handle.send(GO, "go")
        assert await waiting == "go"
    assert ran == {1: 1}
