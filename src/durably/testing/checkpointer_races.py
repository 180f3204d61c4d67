"""`CheckpointerConformance` cases for the fence under a race and the per-claim liveness
window: the promises the workflow store rests on, each seen from the outside."""

from __future__ import annotations

import asyncio
from typing import Any

from durably.errors import Fenced
from durably.testing.checkpointer_fixtures import LONG, CheckpointerFactory, wf
from durably.workflows import Checkpointer, Pass, Recorded

ROUNDS = 12
ALIVE = 0.15


async def _late_record(cp: Checkpointer[Any], holder: Pass) -> Recorded[object] | Fenced:
    try:
        return await cp.record(holder, "late", "from the lapsed pass")
    except Fenced as fenced:
        return fenced


class CheckpointerRaceCases:
    """A claim in flight against a write of the pass before it, and liveness per claim."""

    async def test_a_claim_racing_a_record_of_the_lapsed_holder_leaves_exactly_one_winner(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflows = [wf(f"race{n}") for n in range(ROUNDS)]
        lapsed: list[Pass] = []
        for workflow in workflows:
            holder = await cp.claim(workflow, LONG, ALIVE)
            assert holder is not None
            lapsed.append(holder)
        await asyncio.sleep(ALIVE + 0.1)
        # Every round at once: the new claim and the old holder's write in flight together.
        results = await asyncio.gather(
            *(cp.claim(h.workflow, LONG, LONG) for h in lapsed),
            *(_late_record(cp, h) for h in lapsed),
        )
        claims, writes = results[:ROUNDS], results[ROUNDS:]
        for old, new, write in zip(lapsed, claims, writes, strict=True):
            loaded = await cp.load(old.workflow)
            if isinstance(write, Fenced):
                # The new pass came first: the late write was refused and left nothing.
                assert isinstance(new, Pass)
                assert new.token > old.token
                assert loaded == {}
            else:
                # The write came first: it renewed the old pass, which the claim then met.
                assert isinstance(write, Recorded)
                assert write.first
                assert new is None
                assert loaded == {"late": "from the lapsed pass"}

    async def test_each_claim_lapses_at_its_own_liveness_window(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        short, long = wf("short"), wf("long")
        assert await cp.claim(short, LONG, 0.2) is not None
        assert await cp.claim(long, LONG, LONG) is not None
        assert await cp.claim(short, LONG, LONG) is None
        await asyncio.sleep(0.35)
        assert await cp.claim(short, LONG, LONG) is not None
        assert await cp.claim(long, LONG, LONG) is None

    async def test_a_liveness_window_never_outlasts_the_claims_budget(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, 0.2, LONG)
        assert holder is not None
        await asyncio.sleep(0.35)
        again = await cp.claim(workflow, LONG, LONG)
        assert again is not None
        assert again.token > holder.token

    async def test_a_renewal_sets_the_window_it_asks_for(
        self, checkpointer_factory: CheckpointerFactory
    ) -> None:
        cp = await checkpointer_factory()
        workflow = wf()
        holder = await cp.claim(workflow, LONG, LONG)
        assert holder is not None
        assert await cp.renew(holder, 0.2)  # shorter than the window the claim asked for
        await asyncio.sleep(0.35)
        assert await cp.claim(workflow, LONG, LONG) is not None
