"""What a scheduler's entries written before schedulers kept tenants must still do, once
the store is upgraded: each backing's test writes, as the earlier release did, two queued
entries ("queued-b" visible before "queued-a"), a hand-out whose lease lapsed ("lapsed"),
one still held ("held") and one asleep until 50.0 on the caller's clock ("asleep")."""

from __future__ import annotations

from durably.stores.workflows import Scheduler


async def drained(scheduler: Scheduler) -> list[str]:
    """Every workflow handed out until none is, each answered with `done`."""
    order = []
    while (delivery := await scheduler.next_ready(0)) is not None:
        order.append(delivery.workflow)
        await scheduler.done(delivery)
    return order


async def check_written_before(scheduler: Scheduler, first: list[str]) -> None:
    """The entries hand out in the default tenant's line (``first``, in order), the sleeper
    wakes, a workflow of another tenant is served beside it, and the held hand-out is still
    in flight as written."""
    assert await drained(scheduler) == first
    assert await scheduler.wake_due(60.0) == 1
    await scheduler.make_ready("fresh", tenant="other")
    taken = [await scheduler.next_ready(0) for _ in range(2)]
    assert {d.workflow for d in taken if d is not None} == {"asleep", "fresh"}
    assert sorted(await scheduler.reclaim(0)) == ["asleep", "fresh", "held"]
