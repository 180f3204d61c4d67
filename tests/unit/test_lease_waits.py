"""Waits for a claim another pass holds are fully jittered: two waiters refused together
try again at different instants, not in lockstep, drawn from a seeded source here so the
test is deterministic."""

from __future__ import annotations

import asyncio
import logging
import random
from itertools import accumulate, islice

from durably import App
from durably.app._core import CLAIM_PAUSE, CLAIM_PAUSE_CAP, claim_pauses
from durably.clock import ManualClock
from durably.engine.runtime import Execution
from durably.engine.service import ServiceContext
from durably.engine.worker import start_workflow
from durably.engine.workflow_service import (
    CONTENDED_TRIES,
    GIVE_BACK_SECONDS,
    WorkflowService,
)
from durably.memory import MemoryCheckpointer, MemoryDurable, MemoryScheduler
from durably.stores import QueuePolicy
from durably.stores.workflows import Delivery

ALIVE = 1.0
ROUNDS = 12


def _context(name: str, seed: int) -> ServiceContext:
    return ServiceContext(
        worker=name,
        clock=ManualClock(),
        logger=logging.getLogger("durably.worker"),
        poll_seconds=0.05,
        stopping=asyncio.Event(),
        note_due=lambda _: None,
        fatal=lambda exc: None,
        jitter=random.Random(seed).random,
    )


async def _contended_waits(seeds: tuple[int, int]) -> list[list[float]]:
    """Two workers refused, round after round, the workflows dead passes still hold: how
    long each hid the delivery it took before trying again (what it asked the store)."""
    durable = MemoryDurable(MemoryCheckpointer(), MemoryScheduler(namespace="held", lease=60.0))

    async def body(run: Execution) -> None:
        raise AssertionError("a held workflow runs no pass")

    service = WorkflowService(
        "held", body, durable, concurrency=2, policy=QueuePolicy(), budget=60.0, alive=ALIVE
    )
    for workflow in ("a", "b"):
        await start_workflow(durable, workflow)
        assert await durable.checkpointer.claim(workflow, 600.0, 600.0) is not None
    asked: list[float] = []
    extend = durable.scheduler.extend

    async def extending(delivery: Delivery, within: float) -> bool:
        asked.append(within)
        return await extend(delivery, within)

    durable.scheduler.extend = extending  # type: ignore[method-assign]
    workers = [_context("w1", seeds[0]), _context("w2", seeds[1])]
    waits: list[list[float]] = [[], []]
    for _ in range(ROUNDS):
        await durable.scheduler.reclaim(0)  # both deliveries visible again at once
        for n, ctx in enumerate(workers):
            delivery = await durable.scheduler.next_ready(0)
            assert delivery is not None
            await service.serve_one(ctx, delivery)
            waits[n].append(asked.pop())
    return waits


async def test_two_workers_refused_a_held_workflow_try_again_out_of_step() -> None:
    first, second = await _contended_waits((1, 2))
    window = 2 * ALIVE / CONTENDED_TRIES
    assert all(GIVE_BACK_SECONDS <= wait <= window for wait in first + second)
    # Refused together every round, they never ask for the same wait: not in lockstep.
    assert all(a != b for a, b in zip(first, second, strict=True))
    tries = [set(accumulate(first)), set(accumulate(second))]
    assert not tries[0] & tries[1]
    # On average a tenth of the liveness window, as the fixed wait was.
    mean = sum(first + second) / (2 * ROUNDS)
    assert window / 4 < mean < 3 * window / 4
    assert await _contended_waits((1, 2)) == [first, second]  # seeded: the same again


def test_two_callers_waiting_for_one_claim_pause_out_of_step_within_widening_windows() -> None:
    first = list(islice(claim_pauses(random.Random(1).random), 10))
    second = list(islice(claim_pauses(random.Random(2).random), 10))
    windows = [min(CLAIM_PAUSE_CAP, CLAIM_PAUSE * 2**n) for n in range(10)]
    for pauses in (first, second):
        assert all(0 <= pause <= window for pause, window in zip(pauses, windows, strict=True))
    assert max(first[5:] + second[5:]) > CLAIM_PAUSE  # the window widened
    assert not set(accumulate(first)) & set(accumulate(second))
    assert first == list(islice(claim_pauses(random.Random(1).random), 10))


async def test_a_resume_waiting_for_a_held_claim_draws_its_pauses_from_the_apps_jitter() -> None:
    async with App("memory://") as app:
        checkpointer = (await app.stores()).checkpointer
        # A worker that took the delivery holds the claim a moment, then lets go.
        holder = await checkpointer.claim("wf", 60.0, 60.0)
        assert holder is not None
        draws: list[float] = []
        source = random.Random(7)

        def jitter() -> float:
            draws.append(source.random())
            return draws[-1]

        app._core.jitter = jitter
        waiting = asyncio.create_task(app._core._claim_briefly("wf"))

        async def refused_thrice() -> None:  # each pause after a refusal drawn from it
            while len(draws) < 3:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(refused_thrice(), timeout=5)
        assert not waiting.done()
        await checkpointer.release(holder)
        claimed = await asyncio.wait_for(waiting, timeout=5)
        assert claimed is not None
        await checkpointer.release(claimed)
