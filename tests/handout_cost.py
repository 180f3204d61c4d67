"""What a scheduler's hand-out costs at 1 tenant and at 10,000 (benchmarks.handouts): the
same number of ready workflows either way (all of one tenant, or one of each), then the
median seconds of a ``next_ready`` + ``done`` pair on each, in alternating rounds so a busy
machine slows both alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from benchmarks.handouts import Fill, fill_calls, medians, named

from durably.stores.workflows import Scheduler

TENANTS = 10_000
ROUNDS = 150
MOST_RATIO = 2.0  # 10,000 tenants may cost at most twice one tenant a hand-out

__all__ = ["TENANTS", "check_handout_ratio", "fill_calls", "named"]


async def check_handout_ratio(
    make: Callable[[str], Awaitable[Scheduler]], filler: Fill = fill_calls
) -> None:
    """Fill a scheduler of one tenant and one of `TENANTS` (``make(namespace)`` each, filled
    by ``filler``), and check a hand-out on the second costs at most `MOST_RATIO` times
    the first."""
    one, many = await make("one-tenant"), await make("many-tenants")
    await filler(one, named(1, TENANTS))
    await filler(many, named(TENANTS, TENANTS))
    small, large = await medians([one, many], ROUNDS)
    assert large <= MOST_RATIO * small, (small, large)
