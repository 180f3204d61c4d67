"""What a scheduler's hand-out costs at 1 tenant and at 10,000: the same number of ready
workflows either way (all of one tenant, or one of each), then the median seconds of a
``next_ready`` + ``done`` pair on each, in alternating rounds so a busy machine slows both
alike."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from durably.stores.workflows import Scheduler

TENANTS = 10_000
ROUNDS = 150
MOST_RATIO = 2.0  # 10,000 tenants may cost at most twice one tenant a hand-out
FILL_AT_ONCE = 8  # make_ready calls in flight while filling (a bounded pool's share)


Filler = Callable[[Scheduler, list[tuple[str, str]]], Awaitable[None]]


def named(tenants: int, workflows: int = TENANTS) -> list[tuple[str, str]]:
    """(workflow, tenant) of ``workflows`` ready workflows spread over ``tenants``."""
    return [(f"w{n:05d}", f"t{n % tenants:05d}") for n in range(workflows)]


async def fill(scheduler: Scheduler, names: list[tuple[str, str]]) -> None:
    """Make ``names`` (workflow, tenant) ready, ``FILL_AT_ONCE`` at a time."""
    await scheduler.prepare()
    workflows = len(names)
    for start in range(0, workflows, FILL_AT_ONCE):
        await asyncio.gather(
            *(scheduler.make_ready(w, tenant=t) for w, t in names[start : start + FILL_AT_ONCE])
        )


async def _pair(scheduler: Scheduler) -> float:
    began = time.perf_counter()
    delivery = await scheduler.next_ready(0)
    assert delivery is not None
    await scheduler.done(delivery)
    return time.perf_counter() - began


async def handout_seconds(one: Scheduler, many: Scheduler) -> tuple[float, float]:
    """Median seconds of a hand-out + done on ``one`` and on ``many``, rounds alternating."""
    spans: tuple[list[float], list[float]] = ([], [])
    for _ in range(ROUNDS):
        spans[0].append(await _pair(one))
        spans[1].append(await _pair(many))
    return statistics.median(spans[0]), statistics.median(spans[1])


async def check_handout_ratio(
    make: Callable[[str], Awaitable[Scheduler]], filler: Filler = fill
) -> None:
    """Fill a scheduler of one tenant and one of `TENANTS` (``make(namespace)`` each, filled
    by ``filler``), and check a hand-out on the second costs at most `MOST_RATIO` times
    the first."""
    one, many = await make("one-tenant"), await make("many-tenants")
    await filler(one, named(1))
    await filler(many, named(TENANTS))
    small, large = await handout_seconds(one, many)
    assert large <= MOST_RATIO * small, (small, large)
